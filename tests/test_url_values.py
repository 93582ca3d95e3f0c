"""Every value a link carries is checked before Streamlit sees it (guide/url_values.py): what
it could not read is refused with the page's notice, and the chapter draws to its end."""

from __future__ import annotations

import pytest

from calculator.core.gpus import gpus
from guide import chapters
from guide.markdown import Heading, parse, widget_names
from guide.url_values import CASE_NUMBERS, CASE_TEXTS, parameter_kinds, usable
from guide.widgets import registry, url_kinds
from tests.apptest import open_page

UNREADABLE = ["inf", "-inf", "Infinity", "1e309", "9" * 400, "-" + "9" * 400, "NaN", "1e30", "0x10", "1_000", ""]
NOTICE = {"en": "which this calculator cannot use", "fr": "que ce calculateur ne peut pas utiliser"}


@pytest.mark.parametrize("raw", UNREADABLE)
def test_numbers_a_page_cannot_read(raw):
    assert not usable("number", raw)


@pytest.mark.parametrize("raw", ["0", "-1", "4096", "1.5", "2e3", " 12 ", str(2**53)])
def test_numbers_a_page_can_read(raw):
    assert usable("number", raw)


def test_texts():
    assert usable("text", "meta-llama/Llama-3.1-8B") and usable("text", "modèle/🤖")
    assert not usable("text", "x" * 301) and not usable("text", "a\nb") and not usable("text", "\x00")
    assert usable("free", "torch.OutOfMemoryError: CUDA out of memory.\n" * 20)  # a widget's own text
    assert url_kinds()["om_text"] == "text" and parameter_kinds(url_kinds())["om_text"] == "free"


def test_the_case_parameters_are_known():
    kinds = parameter_kinds(url_kinds())
    assert all(kinds[k] == "number" for k in CASE_NUMBERS) and all(kinds[k] == "text" for k in CASE_TEXTS)


# What a declared kind may be drawn as (guide/widgets/__init__.py: KINDS).
DRAWN_AS = {"int": ("number_input", "slider", "selectbox", "radio"), "float": ("number_input", "slider"),
            "choice": ("selectbox", "radio", "multiselect"), "gpu": ("selectbox", "multiselect"),
            "bool": ("checkbox",), "text": ("text_input", "text_area")}


def test_every_widget_parameter_declares_the_kind_of_its_widget():
    """A parameter's declared kind is the widget it binds: a number field or slider holds an
    int or a float (a float field only when its value is one), a choice among numbers an int,
    a checkbox a bool, a text box text, a GPU picker a catalog key written as the card's name."""
    declared = url_kinds()
    drawn: dict[str, tuple[str, object]] = {}
    for chapter in chapters.CHAPTERS:
        names = widget_names(parse(chapter.content_path("en").read_text()))
        keys = {p.key for name in names for p in registry()[name].params}
        if not keys:
            continue
        at = open_page(chapter.slug, "en")
        for finder in ("number_input", "slider", "selectbox", "radio", "multiselect", "checkbox", "text_input",
                       "text_area"):
            drawn |= {w.key: (finder, w) for w in getattr(at, finder) if w.key in keys}
    assert len(drawn) > 60
    for key, (finder, widget) in drawn.items():
        kind = declared[key]
        assert finder in DRAWN_AS[kind], f"{key}: declared {kind}, drawn as {finder}"
        options = list(getattr(widget, "options", ()))
        if kind == "int" and finder in ("selectbox", "radio"):
            assert all(usable("number", str(o)) for o in options), key
        if kind == "gpu":  # the options shown are the cards' names, which the URL holds
            assert {str(o) for o in options} <= {card.name for card in gpus().values()}, key
        if finder == "number_input" and widget.value is not None:
            assert isinstance(widget.value, float) == (kind == "float"), f"{key}: declared {kind}, holds {widget.value!r}"


def last_heading(chapter, lang: str) -> str:
    return [b.text for b in parse(chapter.content_path(lang).read_text()) if isinstance(b, Heading) and b.level <= 2][-1]


CASES = [("oom", "fr", {"cm_batch": "inf"}), ("fine-tuning", "fr", {"tm_batch": "1e309"}),
         ("cpu-offloading", "en", {"om_gpu_gib": "inf"}), ("slow-model", "en", {"bs_prompt": "9" * 400}),
         ("slow-model", "fr", {"bs_prompt": "-inf"})]


@pytest.mark.parametrize("slug,lang,query", CASES, ids=[f"{s}-{lang}-{list(q)[0]}" for s, lang, q in CASES])
def test_the_issue_links_draw_their_chapter_to_the_end(slug, lang, query):
    chapter = chapters.by_slug(slug)
    at = open_page(slug, lang, **query)
    assert not at.exception, [e.value for e in at.exception]
    assert at.header[-1].value == last_heading(chapter, lang)
    key, value = next(iter(query.items()))
    notices = [w.value for w in at.warning if NOTICE[lang] in w.value]
    assert len(notices) == 1 and key.replace("_", "\\_") in notices[0] and value[:20] in notices[0]
    assert at.number_input(key=key).value != float(value)  # the default, not the link's value


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_case_parameters_are_refused_at_the_top_of_the_page(lang):
    at = open_page("oom", lang, batch="inf", prompt="1e309", new_tokens="9" * 400, sequence="-inf", model="x" * 400)
    assert not at.exception, [e.value for e in at.exception]
    top = at.warning[0].value
    for key in ("batch", "prompt", "new\\_tokens", "sequence", "model"):
        assert f"{key}" in top and NOTICE[lang] in top
    assert at.header[-1].value == last_heading(chapters.by_slug("oom"), lang)


def test_usable_values_are_left_to_the_widgets():
    at = open_page("slow-model", "en", bs_prompt="4096", batch="8")
    assert not [w for w in at.warning if NOTICE["en"] in w.value]
    assert at.number_input(key="bs_prompt").value == 4096
