"""French typography (guide/typography.py): what it changes, and what it must never touch."""

from __future__ import annotations

import pytest

from calculator.core.messages import text
from guide.chapters import CHAPTERS, HOME
from guide.typography import NNBSP, for_language, french

N = NNBSP


@pytest.mark.parametrize("before, after", [
    ("Pourquoi ? Parce que : voilà ; enfin !", f"Pourquoi{N}? Parce que{N}: voilà{N}; enfin{N}!"),
    ("Pourquoi? Voilà: fini;", f"Pourquoi{N}? Voilà{N}: fini{N};"),
    ("« Tried to allocate »", f"«{N}Tried to allocate{N}»"),
    ("«texte»", f"«{N}texte{N}»"),
    ("10 % du temps, 5% de plus", f"10{N}% du temps, 5{N}% de plus"),
    ("16 Go lus, 600 Go/s, 4 bits, 2 ms, 23,99 Gio", f"16{N}Go lus, 600{N}Go/s, 4{N}bits, 2{N}ms, 23,99{N}Gio"),
    ("8 192 tokens, 1 073 741 824 octets", f"8{N}192 tokens, 1{N}073{N}741{N}824{N}octets"),
    ("3.5 Go et 7.4 %", f"3,5{N}Go et 7,4{N}%"),
    ("6,74 milliards", f"6,74{N}milliards"),
])
def test_french_spacing(before, after):
    assert french(before) == after


@pytest.mark.parametrize("kept", [
    "PyTorch 2.1 et transformers 4.56",  # versions keep their point
    "Mistral 7B v0.1, PCIe 4.0 x16, Llama 3.1 405B",
    "la RTX 4090 et le H100",  # model numbers are not thousands
    "2 × 32 × 8 × 128 × 2",  # a product is not a number with thousands
    "Qwen2.5-0.5B",
])
def test_numbers_that_are_not_quantities_are_left_alone(kept):
    assert french(kept) == kept


@pytest.mark.parametrize("code", [
    "Réglez `PYTORCH_ALLOC_CONF=expandable_segments:True` puis relancez.",
    "Appelez `torch.cuda.max_memory_allocated()` : c'est tout.",
    "Le code ``a : b ? c`` reste tel quel.",
])
def test_code_spans_are_untouched(code):
    inside = code.split("`")[1] if "``" not in code else code.split("``")[1]
    assert inside in french(code)


def test_fenced_code_blocks_are_untouched():
    block = "Avant :\n```python\nx = {'a': 1}  # 16 Go ? 10 %\nprint(f\"{y:.2f} Gio\")\n```\nAprès !"
    out = french(block)
    assert "x = {'a': 1}  # 16 Go ? 10 %" in out
    assert 'print(f"{y:.2f} Gio")' in out
    assert out.startswith(f"Avant{N}:") and out.endswith(f"Après{N}!")


@pytest.mark.parametrize("url", [
    "https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage",
    "https://huggingface.co/spaces/hf-accelerate/model-memory-usage?x=1;y=2",
    "https://arxiv.org/abs/2205.14135",
])
def test_urls_and_link_targets_are_untouched(url):
    assert url in french(f"Voir [la documentation : 10 %]({url}) ; ou {url} ; ou <{url}>.")
    linked = french(f"[le lien]({url})")
    assert linked == f"[le lien]({url})"


def test_punctuation_inside_a_word_is_not_punctuation():
    assert french("Utilisez ?lang=fr ou a:b") == "Utilisez ?lang=fr ou a:b"
    assert french("pic : {peak:.2f} Gio") == f"pic{N}: {{peak:.2f}} Gio"  # a format spec is not prose
    assert french("Voilà: fini.") == f"Voilà{N}: fini."


def test_messages_that_go_into_generated_code_are_left_alone():
    assert N not in text("snippet.measured", "fr", predicted="3,2 Gio")


def test_chapter_links_with_a_language_are_untouched():
    assert french("[x](oom?lang=fr#batch-size) !") == f"[x](oom?lang=fr#batch-size){N}!"


def test_table_rules_are_untouched():
    table = "| a | b |\n|---|---|\n| 4 Go | 10 % |"
    assert french(table).split("\n")[1] == "|---|---|"
    assert f"4{N}Go" in french(table)


def test_idempotent_and_english_is_left_as_it_is():
    sample = "Pourquoi ? 16 Go, 8 192 tokens, « oui », 10 % et `code : ici`."
    assert french(french(sample)) == french(sample)
    english = "Why? 16 GB: see `x : y` (10 %)."
    assert for_language(english, "en") == english


def test_ui_messages_and_titles_are_typeset_in_french_only():
    fr = text("frame.unknown_language", "fr", asked="de")
    assert f"«{N}de{N}»" in fr and f"disponible{N};" in fr and "?lang=fr" in fr
    assert text("frame.unknown_language", "en", asked="de") == text("frame.unknown_language", "en", asked="de").replace(N, " ")
    assert HOME.title("fr").endswith(f"modèle{N}?")
    assert all(N not in chapter.title("en") for chapter in CHAPTERS)
