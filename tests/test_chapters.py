"""The registry and the chapter files keep the public contract of DESIGN.md."""

from __future__ import annotations

import re

import pytest

from guide import chapters
from guide.markdown import Heading, anchors, localize_links, parse, widget_names
from guide.widgets import registry

# The contract table of DESIGN.md: reading order and the anchors each chapter must have.
CONTRACT = [
    ("", ()),
    ("slow-model", ("batch-size", "data-parallelism", "inference-code", "precision")),
    ("memory-estimate", ("rule-of-thumb", "exact-count", "inference-overhead", "units")),
    ("quantization", ("precision-factor", "formats", "accuracy-tradeoff")),
    ("parallelism", ("pipeline-parallelism", "pipeline-bubble", "tensor-parallelism")),
    ("cpu-offloading", ("device-map", "zero-offload")),
    ("oom", ("context-length", "dummy-data-test", "batch-size", "sort-by-length")),
    ("serving", ("serving-memory", "concurrency", "how-many-gpus", "engine-settings", "multi-gpu-inference")),
    ("fine-tuning", ("training-memory", "optimizer-states", "activations", "lora", "zero", "distributed")),
    ("estimator", ("estimate", "limits")),
]
LANGS = ("en", "fr")


def test_registry_follows_the_contract_order():
    order = [slug for slug, _ in CONTRACT]
    registered = [c.slug for c in chapters.CHAPTERS]
    assert registered[0] == "" and registered == [s for s in order if s in registered]


@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=lambda c: c.slug or "home")
def test_contract_anchors_exist_in_both_languages(chapter):
    promised = dict(CONTRACT)[chapter.slug]
    assert set(promised) <= set(chapter.anchors)
    for lang in LANGS:
        assert set(chapter.anchors) <= set(anchors(parse(chapter.content_path(lang).read_text())))


@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=lambda c: c.slug or "home")
def test_both_languages_have_the_same_sections_and_widgets(chapter):
    en = parse(chapter.content_path("en").read_text())
    fr = parse(chapter.content_path("fr").read_text())
    assert anchors(en) == anchors(fr)
    assert widget_names(en) == widget_names(fr)
    assert [b.level for b in en if isinstance(b, Heading)] == [b.level for b in fr if isinstance(b, Heading)]
    for name in widget_names(en):
        assert name in registry(), f"{chapter.slug}: no widget named {name}"
    assert len(set(anchors(en))) == len(anchors(en)), "anchors must be unique in a page"


@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=lambda c: c.slug or "home")
@pytest.mark.parametrize("lang", LANGS)
def test_links_between_chapters_point_at_real_sections(chapter, lang):
    text = chapter.content_path(lang).read_text()
    known = {c.slug: set(anchors(parse(c.content_path(lang).read_text()))) for c in chapters.CHAPTERS}
    for slug, anchor in re.findall(r"\]\(([a-z0-9-]+)(?:#([a-z0-9-]+))?\)", text):
        target = "" if slug == "home" else slug
        assert target in known, f"link to a chapter that does not exist: {slug}"
        assert not anchor or anchor in known[target], f"link to a missing section: {slug}#{anchor}"
    for anchor in re.findall(r"\]\(#([a-z0-9-]+)\)", text):
        assert anchor in known[chapter.slug]


@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=lambda c: c.slug or "home")
def test_both_languages_link_to_the_same_sections(chapter):
    """A reader who switches language finds the same ways on to other chapters."""
    link = re.compile(r"\]\(([a-z0-9-]*)(#[a-z0-9-]+)?\)")
    en, fr = (sorted(link.findall(chapter.content_path(lang).read_text())) for lang in LANGS)
    assert en == fr


def test_every_registered_chapter_has_its_page_file():
    for chapter in chapters.CHAPTERS:
        page = chapters.ROOT / chapter.page
        assert page.is_file()
        assert f'render_page("{chapter.slug}")' in page.read_text()


def test_every_widget_is_placed_in_some_chapter():
    placed = {name for c in chapters.CHAPTERS for name in widget_names(parse(c.content_path("en").read_text()))}
    assert set(registry()) == placed


def test_headings_need_explicit_ids():
    with pytest.raises(ValueError):
        parse("## A heading without an id\n")
    blocks = parse("## Taille {#batch-size}\ntext\n[[widget:batch-size]]\n```\n# not a heading\n```")
    assert anchors(blocks) == ["batch-size"] and widget_names(blocks) == ["batch-size"]


def test_chapter_links_keep_the_language():
    slugs = {"oom", "slow-model"}
    assert localize_links("[x](oom#batch-size)", "fr", slugs) == "[x](oom?lang=fr#batch-size)"
    assert localize_links("[x](home)", "en", slugs) == "[x](./?lang=en)"
    assert localize_links("[x](#precision)", "fr", slugs) == "[x](#precision)"
    assert localize_links("[x](https://example.org)", "fr", slugs) == "[x](https://example.org)"
