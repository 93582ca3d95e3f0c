"""Every page, in both languages, through AppTest: no exception, the contract's anchors,
the language from the URL or the browser, previous/home/next from the registry."""

from __future__ import annotations

import pytest

from guide import chapters
from tests.apptest import fingerprint, open_page, section_link, section_links

LANGS = ("en", "fr")


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", chapters.CHAPTERS, ids=lambda c: c.slug or "home")
def test_page_renders_with_its_anchors(chapter, lang):
    at = open_page(chapter.slug, lang)
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == chapter.title(lang)
    rendered = {h.proto.anchor for h in list(at.header) + list(at.subheader)}
    assert set(chapter.anchors) <= rendered


@pytest.mark.parametrize("chapter", chapters.CHAPTERS[1:], ids=lambda c: c.slug)
def test_previous_home_next_follow_the_registry(chapter):
    at = open_page(chapter.slug, "fr")
    footer = [(link.proto.label, link.proto.query_string) for link in at.main.get("page_link")]
    index = chapters.CHAPTERS.index(chapter)
    # French typography (guide/typography.py): a narrow no-break space before the colon
    expected = [f"Précédent\u202f: {chapters.CHAPTERS[index - 1].title('fr')}", "Accueil"]
    if index + 1 < len(chapters.CHAPTERS):
        expected.append(f"Suivant\u202f: {chapters.CHAPTERS[index + 1].title('fr')}")
    assert [label for label, _ in footer] == expected
    every_link = list(at.main.get("page_link")) + list(at.sidebar.get("page_link"))
    assert {link.proto.query_string for link in every_link} == {"lang=fr"}


def test_language_comes_from_the_browser_without_lang():
    at = open_page("slow-model", lang=None, locale="fr-CA")
    assert at.title[0].value == "Mon modèle est très lent"
    assert at.query_params["lang"] == ["fr"] or at.query_params["lang"] == "fr"
    at = open_page("slow-model", lang=None, locale="de-DE")
    assert at.title[0].value == "My model is very slow"


def test_unknown_language_falls_back_and_says_so():
    at = open_page("", lang="xx", locale="fr-FR")
    assert at.title[0].value == chapters.HOME.title("fr")
    assert "«\u202fxx\u202f»" in at.warning[0].value


def test_section_links_carry_language_and_anchor():
    # every value of the chapter's case is written out, defaults included, so the
    # link means the same when a default changes; the address bar itself stays short
    # (the link itself is made in the browser: tests/test_browser.py opens and copies one)
    at = open_page("slow-model", "fr")
    links = section_links(at)
    pinned = ("model=llama-3.1-8b&gpu=l4&dtype=bfloat16&batch=8&prompt=1024&new_tokens=256&workload=generation"
              "&items=100000")
    assert links["pinned"] == f"lang=fr&{pinned}"
    rendered = [h.proto.anchor for h in list(at.header) + list(at.subheader)]
    assert sorted(links["anchors"]) == sorted(rendered) and "batch-size" in rendered  # every heading has its link
    assert (links["label"], links["copy"]) == ("Lien vers cette section", "Copier")
    assert dict(at.query_params) == {"lang": ["fr"]} or dict(at.query_params) == {"lang": "fr"}
    home = section_links(open_page("", "en", gpu="h100"))  # the home page pins its own case
    assert home["pinned"] == "lang=en&model=llama-3.1-8b&gpu=h100&dtype=bfloat16"


def test_copied_links_pin_the_case_and_reproduce_it_when_defaults_change(monkeypatch):
    at = open_page("oom", "en", model="mistral-7b-v0.1", batch="3")
    section = section_link(at, "context-length")
    links = [section, *(c.value for c in at.code if c.value.startswith("http"))]  # the share boxes too
    pinned = "?lang=en&model=mistral-7b-v0.1&gpu=rtx4090&dtype=bfloat16&batch=3&prompt=4096&new_tokens=512"
    assert len(links) > 4 and all(pinned in link for link in links)
    # the same link opened after the chapter's defaults changed: the same figures
    from dataclasses import replace
    from urllib.parse import parse_qsl, urlsplit

    query = dict(parse_qsl(urlsplit(section).query))
    before, short_before = fingerprint(open_page("oom", **query)), fingerprint(open_page("oom", "en", batch="3"))
    oom = chapters.by_slug("oom")
    changed = replace(oom, defaults=replace(oom.defaults, gpu="h100", prompt=512, new_tokens=64, batch=1))
    monkeypatch.setattr(chapters, "CHAPTERS", tuple(changed if c.slug == "oom" else c for c in chapters.CHAPTERS))
    assert chapters.by_slug("oom").defaults.gpu == "h100"
    assert fingerprint(open_page("oom", "en", batch="3")) != short_before  # a short link changes meaning
    assert fingerprint(open_page("oom", **query)) == before  # the copied link does not


@pytest.mark.parametrize("lang", LANGS)
def test_links_in_a_widget_message_stay_in_the_readers_language(lang):
    at = open_page("slow-model", lang, bs_model="meta-llama/Llama-3.1-70B", bs_gpu="NVIDIA T4")
    assert not at.exception
    message = next(e.value for e in at.error)
    assert f"](quantization?lang={lang}#formats)" in message
    assert f"](parallelism?lang={lang}#pipeline-parallelism)" in message
