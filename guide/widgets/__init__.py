"""Embedded calculators. One module per widget; each declares a module-level `WIDGET`.

A widget is placed in a chapter with `[[widget:<name>]]`. It reads its inputs from widgets
bound to the URL (`bind="query-params"`), so a link reproduces a calculation, and it runs in
an `st.fragment`, so changing an input reruns that widget alone. Options shown to readers in
bound widgets are language-neutral (model ids, dtypes, GPU names): the URL is the same in
both languages. One parametrised test exercises every widget (tests/test_widgets.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
import importlib
import pkgutil
from collections.abc import Callable
from urllib.parse import urlencode

import streamlit as st

from calculator.core.messages import text
from guide import url_values
from guide.chapters import CHAPTERS
from guide.format import escape_markdown
from guide.markdown import localize_links

# Chapter slugs a UI string may link to, as `[words](slug#anchor)` like the chapters do.
_SLUGS = frozenset(chapter.slug for chapter in CHAPTERS if chapter.slug)


# What a URL parameter holds. "int" and "float": a number field or slider, or a choice among
# numbers (a tensor-parallel degree); "choice": one or several of a list of stable names (a
# dtype, an engine, a model id); "bool": a checkbox; "text": whatever the reader types (a pasted
# error message); "gpu": a GPU picker, which holds a catalog key and writes the card's name.
KINDS = ("int", "float", "choice", "bool", "text", "gpu")


@dataclass(frozen=True)
class Param:
    """A query parameter a widget binds, of a declared kind (KINDS), with a valid non-default
    value for the tests, and the other values under which changing it must change the result
    (a network between nodes only matters with several nodes)."""

    key: str
    example: str
    kind: str
    given: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"parameter {self.key}: kind {self.kind!r} is not one of {KINDS}")

    def form(self, value: object) -> str:
        """How the widget's value is written in the URL: a GPU picker's key as the card's name."""
        return gpu_name(value) if self.kind == "gpu" else str(value)


def gpu_name(key: object) -> str:
    from calculator.core.gpus import gpu

    return gpu(key).name


def gpu_param(key: str, example: str, given: tuple[tuple[str, str], ...] = ()) -> Param:
    """A GPU picker's parameter: the URL holds the card's name (NVIDIA L4), the widget its key."""
    return Param(key, example, "gpu", given)


def url_kinds() -> dict[str, str]:
    """The declared kind of every parameter a widget binds (guide/url_values.py checks a link's
    values by it before any widget is drawn)."""
    return {param.key: param.kind for widget in registry().values() for param in widget.params}


@dataclass(frozen=True)
class Context:
    lang: str
    slug: str
    anchor: str  # the section the widget sits in: its share link lands there
    case: object | None = None  # the chapter's case (guide.case.ResolvedCase), when it has one
    keys: tuple[str, ...] = ()  # the widget's URL parameters (its WIDGET.params), for its share link
    notes: list = field(default_factory=list, compare=False)  # what its share link cannot carry (share_note)
    answers: list = field(default_factory=list, compare=False)  # its paste-ready answer (answer_with)

    def t(self, key: str, /, **params: object) -> str:
        """A UI string in the reader's language; its links to chapters keep that language and
        the case (`(oom#batch-size)` -> `(oom?lang=fr&model=...#batch-size)`), as in the chapter text."""
        return self.localized(text(key, self.lang, **params))

    def localized(self, message: str) -> str:
        """A message already in the reader's language, its chapter links made to keep it and the case."""
        from guide.case_bar import carried_query

        if "](" not in message:  # no link (most strings): the case need not be read (~2,000 a run)
            return message
        return localize_links(message, self.lang, _SLUGS, carried_query(self.lang))


@dataclass(frozen=True)
class Widget:
    name: str
    render: Callable[[Context], None]
    params: tuple[Param, ...] = field(default_factory=tuple)


@lru_cache(maxsize=1)
def registry() -> dict[str, Widget]:
    found: dict[str, Widget] = {}
    for module in pkgutil.iter_modules(__path__):
        widget = getattr(importlib.import_module(f"{__name__}.{module.name}"), "WIDGET", None)
        if isinstance(widget, Widget):
            if widget.name in found:
                raise ValueError(f"two widgets are named {widget.name}")
            found[widget.name] = widget
    return found


def render_widget(name: str, ctx: Context) -> None:
    widget = registry().get(name)
    if widget is None:
        raise KeyError(f"no widget named {name!r}")
    ctx = replace(ctx, keys=tuple(p.key for p in widget.params))
    with st.container(border=True, key=f"widget-{name}"):
        notice = st.empty()
        sent = {p.key: url_values.sent(p.key) for p in widget.params}  # refused values included
        params = {p.key: p for p in widget.params}
        st.fragment(_guarded(widget.render))(ctx)
        refused = [(key, raw) for key, raw in sent.items() if raw and not _url_value_taken(params[key], raw)]
        if refused:
            notice.warning(" ".join(
                ctx.t("frame.bad_url_value", param=escape_markdown(key, 40), value=escape_markdown(", ".join(raw), 60))
                for key, raw in refused))


def _guarded(render: Callable[[Context], None]) -> Callable[[Context], None]:
    """The frame every widget runs in, so each ends at its last figure: a widget whose inputs
    the engine refuses (a context past the model's positions, a model it cannot price) says why
    in the reader's language instead of stopping the page; then come the share box and, when
    the widget gave one, its paste-ready answer."""
    def run(ctx: Context) -> None:
        from calculator.core.errors import CalculatorError

        ctx = replace(ctx, notes=[], answers=[])
        try:
            render(ctx)
        except CalculatorError as error:
            show_error(ctx, error)
        share_box(ctx, note=" ".join(ctx.notes) or None)
        if ctx.answers:
            from guide.answer_box import answer_box

            answer_box(ctx, ctx.answers[-1])

    return run


def share_note(ctx: Context, note: str | None) -> None:
    """Say, in the share box, what the link cannot carry (an uploaded file)."""
    if note:
        ctx.notes.append(note)


def answer_with(ctx: Context, answer) -> None:
    """Give the frame this calculation's answer (calculator.answers.markdown.Answer) for "Copy as answer"."""
    ctx.answers.append(answer)


def _url_value_taken(param: Param, raw: list[str]) -> bool:
    """Whether the widget took the value the link gave it, compared as the parameter's declared
    kind. Streamlit quietly drops a value it cannot use (text in a number, an unknown option)
    or clamps it (a batch of 1e30), and falls back to the default; the reader must be told."""
    if param.key not in st.session_state:
        return True  # the widget was not drawn this time (a branch of the calculator)
    value = st.session_state[param.key]
    if value is None:  # an input left empty (the page's case): the link's value was not an option
        return not raw[-1].strip()
    if isinstance(value, (list, tuple)):  # a multiselect: the link repeats the parameter
        return sorted(param.form(v) for v in value) == sorted(raw)
    if param.kind == "bool":
        return raw[-1].strip().lower() == str(value).lower()
    if param.kind in ("int", "float"):
        try:
            return float(raw[-1]) == float(value)
        except (TypeError, ValueError):
            return False
    return raw[-1] == param.form(value)


def share_url(ctx: Context, keys: list[str] | tuple[str, ...]) -> str:
    """The full URL that reopens this calculation: language, the whole case (defaults written
    out, guide/case.py: pinned_pairs), the widget's values, its section."""
    from guide.case_bar import pinned_link_pairs

    pairs = pinned_link_pairs(ctx.lang, ctx.case)
    for key in keys:
        value = st.query_params.get_all(key)
        pairs += [(key, v) for v in value]
    base = st.context.url or ""
    return f"{base}?{urlencode(pairs)}#{ctx.anchor}"


def share_box(ctx: Context, note: str | None = None) -> None:
    """The link that reopens this calculation (the case and the widget's parameters); `note`
    says what it cannot carry (a file)."""
    with st.popover(ctx.t("frame.share"), icon=":material/share:"):
        st.caption(ctx.t("frame.share_help"))
        if note:
            st.warning(note, icon=":material/info:")
        st.code(share_url(ctx, ctx.keys), language=None, wrap_lines=True)


def show_error(ctx: Context, error) -> None:
    """A calculator's refusal in the reader's language, with what they typed as plain text."""
    params = {key: escape_markdown(value, 400) for key, value in error.shown_params(ctx.lang).items()}
    st.error(ctx.t(f"error.{error.code}", **params), icon=":material/error:")
