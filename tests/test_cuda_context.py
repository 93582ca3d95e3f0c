"""The CUDA context calibrated from published out-of-memory messages: the data set holds at
least 40 messages with their sources, each reading is the message's own arithmetic, the figures
the calculator uses are the benchmark's, docs/benchmarks.md shows the same table, and any architecture
without enough messages gets the stated fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import cuda_context as bench
from calculator.core.cuda_context import FALLBACK, MEASURED, MIN_MESSAGES, context_for
from calculator.core.gpus import gpu
from calculator.memory.oom_message import parse

GIB, MIB = 2**30, 2**20
BENCHMARKS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def test_at_least_forty_published_messages_with_their_source():
    rows = bench.messages()
    assert len(rows) >= 40
    for row in rows:
        assert row["source"].startswith("https://github.com/") and row["setting"] in ("single", "distributed", "serving")
        assert parse(row["message"]) is not None, row["source"]


def test_a_reading_is_the_messages_own_arithmetic():
    by_source = {row["source"]: outside for row, outside, _ in bench.readings()}
    # RTX 4090 (3DTopia/Phidias-Diffusion#8): 14.56 GiB in use − 13.86 GiB allocated − 213.20 MiB unallocated
    assert by_source["https://github.com/3DTopia/Phidias-Diffusion/issues/8"] == (
        round(14.56 * GIB) - round(13.86 * GIB) - round(213.20 * MIB))
    # T4 in a container (FoundationVision/GenerateU#10): the one listed process is this one
    assert by_source["https://github.com/FoundationVision/GenerateU/issues/10"] == (
        round(14.52 * GIB) - round(14.06 * GIB) - round(330.42 * MIB))
    sources = [row["source"] for row, _, _ in bench.readings()]
    assert "https://github.com/mistralai/mistral-finetune/issues/69" not in sources  # NVML said 0 bytes
    assert "https://github.com/modelscope/DiffSynth-Studio/issues/411" not in sources  # a rank of 8: NCCL


def test_the_calculator_uses_the_benchmarks_figures():
    assert MEASURED == bench.table()


def test_the_readme_shows_the_table():
    assert bench.markdown() in BENCHMARKS.read_text(encoding="utf-8")


def test_ada_median_by_hand():
    # seven Ada readings; the fourth of them sorted is pinokiofactory/flux-webui#11 (RTX 4090)
    figure = context_for("ada")
    assert (figure.messages, figure.source) == (7, "measured")
    assert figure.bytes == round(22.69 * GIB) - round(21.72 * GIB) - round(520.54 * MIB)
    assert gpu("rtx4090").usable_bytes == gpu("rtx4090").total_bytes - figure.bytes


@pytest.mark.parametrize("architecture", ["hopper", "cdna3", "apple", "blackwell", "volta", "", None, "ALL", 42])
def test_architectures_without_enough_messages_fall_back(architecture):
    figure = context_for(architecture)
    assert figure.source == "fallback" and figure.bytes == MEASURED[FALLBACK][1]
    assert MEASURED.get(str(architecture).lower(), (0,))[0] < MIN_MESSAGES or str(architecture).lower() == FALLBACK


def test_the_spread_is_inside_every_cards_headroom():
    from calculator.core.budget import Budget
    from calculator.core.gpus import gpus

    for card in gpus().values():
        budget = Budget(card)
        assert 0 <= budget.context_spread_bytes < budget.headroom_bytes


def test_the_page_says_where_the_context_comes_from_in_both_languages():
    from tests.apptest import open_page

    for lang, card, words in (("en", "h100", "the median of all published out-of-memory messages"),
                              ("fr", "rtx4090", "la médiane que montrent les messages de manque de mémoire publiés")):
        at = open_page("oom", lang, gpu=card)
        helps = " ".join(m.help or "" for m in at.metric)
        assert not at.exception and words in helps
