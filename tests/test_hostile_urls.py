"""Hostile links: every calculator input of every chapter set, through the URL, to values
out of range, of the wrong type, or carrying paths and HTML. The page still renders, each
value is either taken or refused with a message in the page's language, nothing typed
becomes HTML, and no server file is read."""

from __future__ import annotations

import pytest

from guide import chapters
from guide.markdown import parse, widget_names
from guide.widgets import registry
from tests.apptest import open_page
from tests.test_widgets import url_form

HOSTILE = ["-1", "1e30", "abc", "../../../etc/passwd", "<script>alert(1)</script>", "NaN",
           # numbers Streamlit's own reader cannot hold: refused before it sees them
           "inf", "-inf", "1e309", "9" * 400]
REFUSED = {"en": "which this calculator cannot use", "fr": "que ce calculateur ne peut pas utiliser"}


def params_of(chapter) -> list[str]:
    names = widget_names(parse(chapter.content_path("en").read_text()))
    return [p.key for name in names for p in registry()[name].params]


def last_heading(chapter, lang: str) -> str:
    from guide.markdown import Heading

    return [b.text for b in parse(chapter.content_path(lang).read_text()) if isinstance(b, Heading) and b.level <= 2][-1]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("chapter", [c for c in chapters.CHAPTERS if params_of(c)], ids=lambda c: c.slug or "home")
def test_every_input_takes_or_refuses_a_hostile_value(chapter, value):
    lang = "fr" if HOSTILE.index(value) % 2 else "en"
    keys = params_of(chapter)
    at = open_page(chapter.slug, lang, **{key: value for key in keys})
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == chapter.title(lang)
    assert at.header[-1].value == last_heading(chapter, lang)  # the chapter is drawn to its end
    warnings = "\n".join(w.value for w in at.warning)
    for key in keys:
        if url_form(at, key) == value:
            continue  # taken as is (a free-text field: the calculator answers it itself)
        assert REFUSED[lang] in warnings and key.replace("_", "\\_") in warnings, f"{key}={value} silently dropped"
    for element in at.get("html"):
        assert "alert(1)" not in str(element.proto), "typed text reached raw HTML"


def test_a_refused_value_is_shown_escaped():
    """A model field takes typed text (a Hub id): the seam refuses this one, and the message
    shows it as text, never as a link or HTML."""
    at = open_page("", "fr", qc_model="[lien](http://example.org) <b>gras</b>")
    [message] = [m.value for m in (*at.warning, *at.error) if "lien" in m.value]
    assert "\\[lien\\]\\(http" in message and "\\<b\\>" in message
