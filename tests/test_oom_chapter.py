"""The oom chapter's widgets in the app (AppTest): figures from the calculator, user text
read safely, answers in the reader's language."""

from __future__ import annotations

import pytest

from calculator.core.budget import Budget
from calculator.models import catalog
from calculator.core.gpus import gpu
from calculator.memory.inference import largest_batch, largest_context
from calculator.core.units import format_count
from tests.apptest import open_page
from tests.test_oom_message import RTX_4090, TORCH_1_13, TORCH_2_4


def alerts(at) -> str:
    return "\n".join(a.value for kind in (at.success, at.info, at.warning, at.error) for a in kind)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_a_pasted_message_is_read_in_the_readers_language(lang):
    at = open_page("oom", lang, om_text=TORCH_1_13)
    assert not at.exception
    text = alerts(at)
    assert "max_split_size_mb" in text  # PyTorch 2.0 and before: the older setting
    table = str(at.dataframe[0].value)
    # reserved 13.98 GiB - allocated 10.56 GiB: 3.42 GiB kept but unused
    assert ("3.42 GiB" if lang == "en" else "3,42 Gio") in table


@pytest.mark.parametrize("lang, words", [("en", "this case's weights take 14.96 GiB"),
                                         ("fr", "les poids de ce cas occupent 14,96 Gio")])
def test_the_message_is_read_against_the_pages_case(lang, words):
    # Llama-3.1-8B in bfloat16 (the chapter's case): 16.06 GB of weights inside 20.91 GiB allocated
    at = open_page("oom", lang, om_text=RTX_4090)
    assert not at.exception
    assert words in alerts(at).replace("\u202f", " ").replace("\u00a0", " ")


def test_other_processes_are_named():
    at = open_page("oom", "en", om_text=TORCH_2_4)
    assert "Another process" in alerts(at) and "9.21 GiB" in alerts(at)


@pytest.mark.parametrize("garbage", ["[click](javascript:alert(1)) <img src=x onerror=alert(1)>", "# hello\n" * 50])
def test_garbage_gets_a_clear_answer_and_is_never_shown(garbage):
    at = open_page("oom", "fr", om_text=garbage)
    assert not at.exception
    assert any("reconnaissons" in e.value for e in at.error)
    shown = "\n".join(m.value for m in at.markdown)
    assert "javascript:" not in shown and "<img" not in shown


def test_context_widget_marks_the_calculators_largest_context():
    at = open_page("oom", "en", cm_model="meta-llama/Llama-3.1-8B", cm_gpu="NVIDIA GeForce RTX 4090", cm_batch="2")
    summary, spec = catalog.stored_summary("llama-3.1-8b"), catalog.stored_spec("llama-3.1-8b")
    expected = largest_context(summary, spec, Budget(gpu("rtx4090")), 2, limit=spec.max_positions)
    assert f"**{format_count(expected)} tokens**" in alerts(at)


def test_largest_batch_widget_warns_about_the_typical_length_trap():
    at = open_page("oom", "en", gpu="a100-80gb")
    summary, spec = catalog.stored_summary("llama-3.1-8b"), catalog.stored_spec("llama-3.1-8b")
    capacity = Budget(gpu("a100-80gb"))
    safe, typical = largest_batch(summary, spec, capacity, 8192), largest_batch(summary, spec, capacity, 512)
    assert typical > safe
    assert f"**{format_count(typical)}**" in alerts(at) and f"**{format_count(safe)}**" in alerts(at)


def test_sort_by_length_longest_first_fails_at_the_first_batch():
    at = open_page("oom", "en", batch="8")  # 50,000 samples by default: 6,250 batches of 8
    rows = at.dataframe[-1].value
    by_order = dict(zip(rows.iloc[:, 0], rows.iloc[:, 1]))
    assert by_order["Longest first"] == "batch 1 of 6,250"
    shortest_first = int(by_order["Shortest first"].split()[1].replace(",", ""))
    assert by_order["Shortest first"].endswith("of 6,250") and shortest_first > 6_000  # it dies hours in


def test_the_message_is_read_against_the_cases_own_lengths():
    """The case's prompt + new tokens, as its bar shows them: not the serving chapter's context
    field, which this page neither shows nor lets the reader set."""
    at = open_page("oom", "en", om_text=RTX_4090, batch="2", prompt="1000", new_tokens="24")
    assert not at.exception
    assert "bfloat16, batch 2, 1,024 tokens):" in alerts(at)  # 1,000 + 24, not the hidden 4,096
