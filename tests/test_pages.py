"""Every page, in both languages, through AppTest: no exception, the contract's anchors,
the language from the URL or the browser, previous/home/next from the registry."""

from __future__ import annotations

import pytest

from guide import chapters
from tests.apptest import open_page

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
    at = open_page("slow-model", "fr")
    codes = [c.value for c in at.code]
    assert "http://localhost:8501/slow-model?lang=fr#batch-size" in codes


@pytest.mark.parametrize("lang", LANGS)
def test_links_in_a_widget_message_stay_in_the_readers_language(lang):
    at = open_page("slow-model", lang, bs_model="meta-llama/Llama-3.1-70B", bs_gpu="NVIDIA T4")
    assert not at.exception
    message = next(e.value for e in at.error)
    assert f"](quantization?lang={lang}#formats)" in message
    assert f"](parallelism?lang={lang}#pipeline-parallelism)" in message
