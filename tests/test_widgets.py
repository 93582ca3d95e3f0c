"""One parametrised test over every widget (as streamlit-extras does over its extras): each
renders in both languages, takes every bound input from the URL, and changes its result
when that input changes. URL values are the same in both languages."""

from __future__ import annotations

from functools import cache

import pytest

from guide import chapters
from guide.markdown import parse, widget_names
from guide.widgets import registry
from tests.apptest import fingerprint, open_page

WIDGETS = sorted(registry())


@cache
def default_page(slug: str, lang: str):
    """A chapter opened without parameters: the same page for every widget it holds (run once
    per worker; the tests only read it)."""
    return open_page(slug, lang)


def home_of(name: str) -> str:
    for chapter in chapters.CHAPTERS:
        if name in widget_names(parse(chapter.content_path("en").read_text())):
            return chapter.slug
    raise AssertionError(f"widget {name} is in no chapter")


def url_form(at, key: str) -> str | None:
    """The value a bound widget holds, written as it appears in a URL (a multiselect's
    choices joined with '&', as repeated URL parameters)."""
    for finder in (at.selectbox, at.number_input, at.checkbox, at.text_input, at.text_area, at.slider, at.radio,
                   at.multiselect):
        try:
            widget = finder(key=key)
        except KeyError:
            continue
        if finder == at.multiselect:
            return "&".join(widget.options[i] for i in widget.indices)
        if finder == at.selectbox or finder == at.radio:
            if widget.value is None:
                return None  # empty: the page's case (a typed model is a value beside the options)
            # what the URL holds: the stable value (a label in the reader's language is only shown)
            forms = {p.key: p.form for w in registry().values() for p in w.params}
            return forms.get(key, str)(widget.value)
        if finder == at.checkbox:
            return "true" if widget.value else "false"
        value = widget.value
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return None


@pytest.mark.parametrize("lang", ["en", "fr"])
@pytest.mark.parametrize("name", WIDGETS)
def test_widget_reads_every_input_from_the_url(name, lang):
    """Each parameter's example is read and written back as the same stable value in both
    languages (a label shown in French never reaches the URL)."""
    widget = registry()[name]
    slug = home_of(name)
    default = default_page(slug, lang)
    assert not default.exception, [e.value for e in default.exception]
    filled = open_page(slug, lang, **{p.key: p.example for p in widget.params})
    assert not filled.exception, [e.value for e in filled.exception]
    for param in widget.params:
        assert url_form(filled, param.key) == param.example, param.key
        assert url_form(default, param.key) != param.example, f"{param.key}: example equals the default"
    assert fingerprint(filled) != fingerprint(default)


@pytest.mark.parametrize("name", WIDGETS)
def test_each_input_changes_the_result(name):
    widget = registry()[name]
    slug = home_of(name)
    baselines = {}  # one page run per set of given values (most parameters have none)
    for param in widget.params:
        if param.given not in baselines:
            page = open_page(slug, "en", **dict(param.given)) if param.given else default_page(slug, "en")
            baselines[param.given] = fingerprint(page)
        baseline = baselines[param.given]
        changed = open_page(slug, "en", **dict(param.given), **{param.key: param.example})
        assert not changed.exception
        assert fingerprint(changed) != baseline, f"{name}: changing {param.key} changed nothing"

