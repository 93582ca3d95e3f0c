"""One term per idea in French: the variants content/glossary.toml lists are flagged wherever
they appear in the chapters (content/fr/*.md) or the widgets' messages (content/ui/fr/*.toml)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
import re
import tomllib

import pytest

from calculator.core.messages import catalog

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "content" / "glossary.toml"

_FENCED = re.compile(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", re.S | re.M)
_CODE = re.compile(r"(`+).+?\1")
_TARGET = re.compile(r"\]\([^)\s]*\)")
# The label of a link to an outside source is often the English title of a paper or a page.
_EXTERNAL_LABEL = re.compile(r"\[[^\]]*\]\(https?://[^)\s]*\)")
_ANCHOR = re.compile(r"\{#[a-z0-9-]+\}|\[\[widget:[a-z0-9-]+\]\]")  # ids and widget markers are names
_URL = re.compile(r"https?://\S+")
_PLACEHOLDER = re.compile(r"\{\{?[a-z_0-9]+[^{}]*\}?\}")  # {device} in a message is a name, not prose


def prose(text: str) -> str:
    """The words a reader reads: no code, no link targets, no URLs."""
    for pattern in (_FENCED, _CODE, _EXTERNAL_LABEL, _TARGET, _URL, _PLACEHOLDER, _ANCHOR):
        text = pattern.sub(" ", text)
    return text


@cache
def terms() -> list[dict]:
    with open(GLOSSARY, "rb") as handle:
        return tomllib.load(handle)["term"]


def french_texts() -> list[tuple[str, str]]:
    """(where, prose) for every French chapter and every French UI message."""
    found = [(path.name, prose(path.read_text(encoding="utf-8")))
             for path in sorted((ROOT / "content" / "fr").glob("*.md"))]
    found += [(f"ui/fr {key}", prose(value)) for key, value in catalog("fr").items()]
    return found


def found(pattern: re.Pattern, where: str, text: str) -> list[str]:
    """Matches across line breaks (a term can be wrapped), reported with their line."""
    flat = text.replace("\n", " ")
    return [f"{where}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}" for m in pattern.finditer(flat)]


def test_every_entry_says_what_to_use_and_what_to_avoid():
    for term in terms():
        assert term["idea"] and term["fr"] and term["avoid"], term
        for pattern in term["avoid"]:
            re.compile(pattern)


@pytest.mark.parametrize("term", terms(), ids=lambda t: t["idea"][:40])
def test_french_uses_one_term_per_idea(term):
    patterns = [re.compile(p, re.I) for p in term["avoid"]]
    hits = [hit for where, text in french_texts() for p in patterns for hit in found(p, where, text)]
    assert not hits, f"use « {term['fr']} » instead:\n" + "\n".join(hits)


def test_the_prose_filter_leaves_code_and_urls_out():
    text = "Le `device_map` et [un lien](https://example.org/appareil) sur {device} :\n```\nappareil = 1\n```\nfin"
    assert "appareil" not in prose(text) and "device" not in prose(text)


# A feminine word before the card's name: the glossary's gender rule, on the raw messages (the
# prose filter above drops placeholders, so « sur la {gpu} » escaped the entry's regex).
_FEMININE_BEFORE_GPU = re.compile(r"\b(?:la|une|cette|seule|toute)\s+\{gpu\}", re.I)


def test_the_card_placeholder_is_masculine_like_a_gpu():
    hits = [f"ui/fr {key}: {m.group(0)!r}" for key, value in catalog("fr").items()
            for m in _FEMININE_BEFORE_GPU.finditer(value)]
    assert not hits, "write « le {gpu} », « un {gpu} » (un GPU, le H100):\n" + "\n".join(hits)


def test_the_gender_check_catches_a_feminine_card():
    assert _FEMININE_BEFORE_GPU.search("tient sur la {gpu}, qui laisse")
    assert not _FEMININE_BEFORE_GPU.search("tient sur le {gpu} ; la carte")
