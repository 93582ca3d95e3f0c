"""Every section names its sources as real links, both languages link the same targets, and
every chapter ends with a short further-reading list (the memory chapters with the four
references readers are sent to most). Code in the chapters is valid Python."""

from __future__ import annotations

import ast
import re

import pytest

from guide import chapters
from guide.markdown import Heading, Text, parse

LANGS = ("en", "fr")
EXTERNAL = re.compile(r"\]\((https?://[^)\s]+)\)")
PYTHON = re.compile(r"```python\n(.*?)```", re.S)

# Sections that are the guide's own machinery rather than claims, so they need no source.
NO_SOURCE = {("", "chapters"), ("estimator", "take-away")}
MEMORY_CHAPTERS = ("memory-estimate", "cpu-offloading", "oom", "fine-tuning", "estimator", "parallelism")
MEMORY_READING = (
    "https://huggingface.co/blog/train_memory",  # Hugging Face blog on training memory
    "https://huggingface.co/spaces/hf-accelerate/model-memory-usage",  # the "Model Memory Usage" Space
    "https://huggingface.co/docs/transformers/perf_train_gpu_many",  # transformers' parallelism documentation
    "https://huggingface.co/spaces/nanotron/ultrascale-playbook",  # the Ultra-Scale Playbook
)
IDS = lambda c: c.slug or "home"  # noqa: E731


def sections(chapter: chapters.Chapter, lang: str) -> dict[str, str]:
    """Text of each section by anchor ("" for what comes before the first heading); a
    subsection is a section of its own, as readers link to it."""
    found: dict[str, str] = {"": ""}
    current = ""
    for block in parse(chapter.content_path(lang).read_text(encoding="utf-8")):
        if isinstance(block, Heading):
            current = block.anchor
            found[current] = ""
        elif isinstance(block, Text):
            found[current] += block.markdown + "\n"
    return found


def links(text: str) -> set[str]:
    return set(EXTERNAL.findall(text))


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=IDS)
def test_every_section_names_its_sources_as_links(chapter, lang):
    missing = [anchor for anchor, text in sections(chapter, lang).items()
               if anchor and (chapter.slug, anchor) not in NO_SOURCE and not links(text)]
    assert not missing, f"{chapter.slug or 'home'} ({lang}): sections without a link to a source: {missing}"


@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=IDS)
def test_both_languages_link_the_same_targets(chapter):
    en, fr = sections(chapter, "en"), sections(chapter, "fr")
    assert en.keys() == fr.keys()
    for anchor in en:
        assert links(en[anchor]) == links(fr[anchor]), f"{chapter.slug or 'home'}#{anchor or '(intro)'}"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=IDS)
def test_every_chapter_ends_with_further_reading(chapter, lang):
    found = sections(chapter, lang)
    assert list(found)[-1] == "further-reading"
    reading = links(found["further-reading"])
    assert len(reading) >= 3
    if chapter.slug in MEMORY_CHAPTERS:
        assert set(MEMORY_READING) <= reading, set(MEMORY_READING) - reading


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=IDS)
def test_links_are_stable_public_addresses(chapter, lang):
    for url in links(chapter.content_path(lang).read_text(encoding="utf-8")):
        assert url.startswith("https://"), url
        assert "localhost" not in url and "127.0.0.1" not in url, url
        assert not re.match(r"https://arxiv\.org/pdf/", url), f"link the abstract page: {url}"
        assert not re.search(r"[?&]lang=", url), f"a chapter link is written (slug#anchor): {url}"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=IDS)
def test_python_in_the_chapters_parses(chapter, lang):
    for code in PYTHON.findall(chapter.content_path(lang).read_text(encoding="utf-8")):
        ast.parse(code)


# Sections added by a content pass, which other chapters and the home page link to:
# anchors are a public contract (DESIGN.md), so they are kept like the registry's.
ADDED_SECTIONS = {
    "": ("slow", "further-reading"),
    "slow-model": ("triage", "paged-attention", "reproducibility", "static-cache", "speculative-decoding",
                   "no-nvidia-gpu", "further-reading"),
    "memory-estimate": ("loading-ram", "three-readings", "further-reading"),
    "oom": ("find-memory", "quantized-cache", "further-reading"),
    "fine-tuning": ("paged-optimizers", "large-vocabulary", "packing", "further-reading"),
    "quantization": ("further-reading",),
    "parallelism": ("further-reading",),
    "cpu-offloading": ("further-reading",),
    "estimator": ("further-reading",),
    "serving": ("further-reading",),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("slug", ADDED_SECTIONS)
def test_added_sections_stay(slug, lang):
    assert set(ADDED_SECTIONS[slug]) <= set(sections(chapters.by_slug(slug), lang))


# Every section ends with what to do: its last paragraphs name the action, in both languages.
ACTION = {"en": re.compile(r"What to (?:do|try)"), "fr": re.compile(r"Que faire|Ce qu'il faut essayer|Et ensuite")}
NO_ACTION = {("", "chapters"), ("", "slow")}  # the list of chapters; the triage list is itself the action


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=IDS)
def test_every_section_says_what_to_do(chapter, lang):
    missing = [anchor for anchor, text in sections(chapter, lang).items()
               if anchor not in ("", "further-reading") and (chapter.slug, anchor) not in NO_ACTION
               and not ACTION[lang].search(text)]
    assert not missing, f"{chapter.slug or 'home'} ({lang}): no 'what to do' in {missing}"
