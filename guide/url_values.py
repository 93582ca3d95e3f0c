"""Every value a link gives a calculator, checked before Streamlit sees it.

Streamlit seeds a widget bound to the URL (`bind="query-params"`) from the link's value while
the widget is being drawn; `inf`, `-inf`, `1e309` or a 400-digit integer in a number field
raise inside its deserializer, and the page stops there with a generic English error. So the
page's first step, before any widget (guide/render.render_page), is `refuse_bad_values(url_kinds())`:
it checks the values of every parameter a widget declares, by its declared kind
(guide.widgets.url_kinds(), which the page passes in), and of
the chapter case's parameters (batch, prompt, new_tokens, sequence as numbers; model, gpu,
dtype as short printable names), and takes the ones a calculator cannot use out of the
parameters Streamlit seeds from. The widget then starts from its default, and the reader is
told with the notice the page already gives for values Streamlit drops (frame.bad_url_value):
by the widget that declares the parameter, or at the top of the page for the case's.

The link in the address bar loses those parameters too, and keeps its #section: Streamlit
rewrites the address without its fragment, so the page asks the browser to do it instead
(assets/frame.html, from a data attribute; guide/render.py passes `dropped()` to it).
"""

from __future__ import annotations

import math
import re

import streamlit as st

# The case every chapter starts from travels in the URL under these names (DESIGN.md).
CASE_NUMBERS = ("batch", "prompt", "new_tokens", "sequence")
CASE_TEXTS = ("model", "gpu", "dtype")
MAX_NUMBER = 2**53  # beyond, a browser's number field cannot even hold it exactly
MAX_NUMBER_CHARS = 40
MAX_TEXT_CHARS = 300
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_STATE_KEY = "_guide_url_refused"


def parameter_kinds(declared: dict[str, str]) -> dict[str, str]:
    """Every parameter a link can carry, as the check it gets: "number", "text" (the case's
    names: a catalog model, a Hub id, a GPU, a dtype) or "free" (any string Streamlit takes: a
    widget's choice, which it matches against its options, or a pasted error message).
    `declared`: each widget parameter's declared kind (guide.widgets.url_kinds), passed in by
    the page so that this module, which the widgets' frame imports, never imports the widgets."""
    kinds = {key: "number" for key in CASE_NUMBERS} | {key: "text" for key in CASE_TEXTS}
    for key, kind in declared.items():
        kinds.setdefault(key, "number" if kind in ("int", "float") else "free")
    return kinds


def usable(kind: str, raw: str) -> bool:
    """Whether a link's value is one a calculator could take: for a number, a finite decimal
    of at most MAX_NUMBER_CHARS characters and at most 2^53 in size (Streamlit then clamps
    it to the field's range and says so); for a name of the case, at most MAX_TEXT_CHARS
    printable characters; free text, anything."""
    if kind == "free":
        return True
    if kind == "number":
        text = raw.strip()
        if len(text) > MAX_NUMBER_CHARS or not _NUMBER.match(text):
            return False  # inf, nan, 0x10, 1_000, words: not a number a link should carry
        value = float(text)
        return math.isfinite(value) and abs(value) <= MAX_NUMBER
    return len(raw) <= MAX_TEXT_CHARS and raw.isprintable()


def refuse_bad_values(declared: dict[str, str]) -> dict[str, list[str]]:
    """Take every unusable value out of the parameters Streamlit seeds widgets from, before
    any widget is drawn (`declared`: the widget parameters' kinds, guide.widgets.url_kinds).
    Returns (and keeps for this run) what was taken: name -> values."""
    kinds = parameter_kinds(declared)
    refused: dict[str, list[str]] = {}
    for key in list(st.query_params):
        kind = kinds.get(key)
        if kind is None:
            continue
        values = st.query_params.get_all(key)
        if values and not all(usable(kind, value) for value in values):
            refused[key] = values
    if refused:
        _forget(refused)
    st.session_state[_STATE_KEY] = refused
    return refused


def sent(key: str) -> list[str]:
    """The values the link gave a parameter, refused ones included (for the notice)."""
    return st.query_params.get_all(key) or list(st.session_state.get(_STATE_KEY, {}).get(key, ()))


def refused() -> dict[str, list[str]]:
    """What refuse_bad_values took out in this run."""
    return dict(st.session_state.get(_STATE_KEY, {}))


def dropped() -> str:
    """The refused parameters, space-separated: the page removes them from the address bar."""
    return " ".join(sorted(refused()))


def _forget(refused: dict[str, list[str]]) -> None:
    """Remove values from the query parameters of this run and from those Streamlit seeds
    widgets from, without telling the browser (Streamlit would rewrite the address without
    its #section; the page script does it instead)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None:
        return
    with ctx.session_state.query_params() as params:
        for key in refused:
            params.discard_param_no_forward_msg(key)
            params._initial_query_params.pop(key, None)  # what widgets are seeded from (Streamlit 1.67)
