"""The workload in the case: the links contract's example link per workload (docs/links.md) opens
slow-model#batch-size on it, in the workload's unit and the reader's language, with the same
figures as the CLI; a workload the model cannot run falls back to its own; a measured speed
is compared with the ceiling."""

from __future__ import annotations

import json
import re

import pytest

from guide import chapters
from guide.case import Case, read_case
from tests.apptest import fingerprint, open_page
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

LINKS = (chapters.ROOT / "docs" / "links.md").read_text(encoding="utf-8")
EXAMPLES = dict(re.findall(r"^- (generation|forward pass|sequence to sequence|speech|vision): `/slow-model\?([^`#]+)#",
                           LINKS, re.M))
UNITS = {"generation": ("Tokens/s", "Tokens/s"), "forward pass": ("Sequences/s", "Séquences/s"),
         "sequence to sequence": ("Answers/s", "Réponses/s"), "speech": ("Audio hours per hour", "Heures d’audio"),
         "vision": ("Images/s", "Images/s")}


def query_of(text: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in text.split("&"))


def test_the_readme_has_one_example_per_workload():
    assert set(EXAMPLES) == set(UNITS)


@pytest.mark.parametrize("workload", list(UNITS))
def test_each_workload_link_opens_in_its_unit(workload):
    query = query_of(EXAMPLES[workload])
    lang = query.pop("lang")
    at = open_page("slow-model", lang, **query)
    assert not at.exception and not at.error, [e.value for e in at.error]
    tables = " ".join(" ".join(map(str, d.value.columns)) for d in at.dataframe)
    assert UNITS[workload][lang == "fr"] in tables


def test_whisper_on_the_page_equals_the_cli():
    query = query_of(EXAMPLES["speech"])
    at = open_page("slow-model", query.pop("lang"), **query)
    data = json.loads(cli("speed", "whisper-small", "--gpu", "t4", "--dtypes", "float16", "--batches", "16",
                          "--new-tokens", "128", "--json").stdout)
    row = data["rows"][0]
    assert data["workload"] == "speech" and data["encoder_tokens"] == 1500
    text = fingerprint(at)
    assert f"{row['audio_hours_per_hour']:,.0f} hours of audio per hour" in text
    hours = 240000 / 16 * row["seconds_per_batch"] / 3600
    assert f"**{hours:.1f} h**" in text


def test_a_workload_the_model_cannot_run_falls_back_to_its_own():
    case, refused, _ = read_case({"workload": ["speech"]}, Case())
    assert case.workload == "speech" and not refused
    at = open_page("slow-model", "en", model="llama-3.1-8b", workload="speech")
    assert not at.exception and not at.error
    assert "Tokens/s" in " ".join(" ".join(map(str, d.value.columns)) for d in at.dataframe)
    bad = open_page("slow-model", "fr", workload="dictation")
    assert any("workload" in w.value for w in bad.warning)


@pytest.mark.parametrize("lang,words", [("en", "of the ceiling"), ("fr", "du plafond")])
def test_a_measured_speed_names_its_share_and_the_next_section(lang, words):
    at = open_page("slow-model", lang, model="bert-base-cased", gpu="t4", dtype="float16", batch="64", prompt="128",
                   bs_measured="400")
    data = json.loads(cli("speed", "bert-base-cased", "--gpu", "t4", "--dtypes", "float16", "--batches", "64",
                          "--mode", "forward", "--sequence", "128", "--measured", "400", "--json").stdout)
    measured = data["measured"]
    info = " ".join(i.value for i in at.info)
    assert words in info and "#inference-code" in info and measured["next_section"] == "slow-model#inference-code"
    share = f"{measured['fraction']:.0%}" if lang == "en" else f"{round(measured['fraction'] * 100)}\u202f%"
    assert share in info


@pytest.mark.parametrize("workload,expected", [("speech", "chunk_length_s=30, batch_size=BATCH"),
                                               ("forward pass", "AutoModel, AutoTokenizer"),
                                               ("sequence to sequence", "AutoModelForSeq2SeqLM")])
def test_the_page_gives_the_code_of_its_workload(workload, expected):
    query = query_of(EXAMPLES[workload])
    at = open_page("slow-model", query.pop("lang"), **query)
    code = next(c.value for c in at.code if c.language == "python" and "MODEL = " in c.value)
    assert expected in code and f"BATCH = {query['batch']}" in code


def test_bad_workload_and_items_values_are_refused():
    case, refused, _ = read_case({"workload": ["<script>alert(1)</script>"], "items": ["1e99"]}, Case())
    assert (case.workload, case.items) == (Case().workload, Case().items)
    assert sorted(r.param for r in refused) == ["items", "workload"]
    case, refused, _ = read_case({"workload": ["vision"], "items": ["2000000"]}, Case())
    assert (case.workload, case.items, refused) == ("vision", 2_000_000, ())
