"""Plotly figures with the reader's units and labels. Data in, figure out.

A figure is written down as the calls that draw it (`Drawing`: add_bar, update_layout...).
`show_chart` writes the JSON plotly.js reads straight from those calls (guide/chart_spec.py:
~0.2 ms a figure instead of ~6 with plotly.py, which checks every property it is given; the
tests check every chart they draw against plotly.py's own). A drawing that writer leaves
(a numpy array, a second axis) is built with plotly.py, once per drawing: a case change redraws
every chart of the page, most of them with the same calls as before. plotly.py then spends
about half its time parsing the same property paths ("marker_color", "line_dash") again, so
`keep_path_parses` keeps them (chart_spec.py reads the same parse).
"""

from __future__ import annotations

from calculator.core.units import GIB
from functools import lru_cache

import plotly.graph_objects as go
import plotly.io
import streamlit as st
import streamlit.components.v2

from guide import chart_spec
from guide.chapters import ROOT
from guide.http import PLOTLY_PATH, base_path
from guide.i18n import t

# The figure methods a drawing takes down; each is replayed on a go.Figure, in order.
METHODS = frozenset({"add_bar", "add_scatter", "add_shape", "add_annotation", "update_layout", "update_xaxes",
                     "update_yaxes"})
SCALARS = (str, int, float, bool, type(None))
KEPT_FIGURES = 64  # built figures kept (a chapter draws at most ~6; a few readers' cases at once)
DEFAULT_HEIGHT = 450  # plotly's own, for a figure that sets none
CHART_COMPONENT = "guide.chart"


def keep_path_parses() -> None:
    """Keep plotly's parse of a property path by its text (plotly 7.1 parses it anew at every
    use: "marker_color" -> ("marker", "color")). The parse reads the text alone (and plotly's
    constant list of names holding an underscore), so a kept one is the one plotly would make;
    each caller gets its own list of positions. The fine-tuning chapter's six figures build in
    0.05 s of CPU instead of 0.10 (best of 5, busy 2-core machine), the same figures
    (tests/test_page_caches.py)."""
    import plotly.basedatatypes as base

    parse = base._str_to_dict_path_full
    if getattr(parse, "kept_parse", False):
        return
    kept = lru_cache(maxsize=1024)(parse)

    def parse_kept(path):
        if not isinstance(path, str):
            return parse(path)
        props, starts = kept(path)
        return props, list(starts)

    parse_kept.kept_parse, parse_kept.plotly_parse = True, parse
    base._str_to_dict_path_full = parse_kept


keep_path_parses()


class Drawing:
    """The calls that draw a figure, in order; `key()` is them as one hashable value."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str):
        if name not in METHODS:
            raise AttributeError(name)

        def record(*args, **kwargs) -> Drawing:
            self.calls.append((name, args, kwargs))
            return self
        return record

    def key(self) -> tuple:
        return tuple((name, frozen(args), frozen(kwargs)) for name, args, kwargs in self.calls)

    def figure(self) -> go.Figure:
        """The plotly figure these calls draw (a new one each time)."""
        fig = go.Figure()
        for name, args, kwargs in self.calls:
            getattr(fig, name)(*args, **kwargs)
        return fig


def frozen(value):
    """A hashable copy of a call's arguments that two calls share only when plotly would get
    the same values: each number keeps its type (1, 1.0 and True draw differently). Anything
    else (a numpy array, a plotly object) raises TypeError, and that figure is not kept."""
    if type(value) in SCALARS:
        return (type(value), value)
    if type(value) in (list, tuple):
        return (type(value), tuple(frozen(item) for item in value))
    if type(value) is dict:
        return (dict, tuple((key, frozen(item)) for key, item in value.items()))
    raise TypeError(f"a figure argument of type {type(value).__name__}")


class _Keyed:
    """A drawing as a cache key: equal when the calls are; it keeps the first drawing's calls."""

    __slots__ = ("drawing", "frozen", "hash")

    def __init__(self, drawing: Drawing, key: tuple) -> None:
        self.drawing, self.frozen, self.hash = drawing, key, hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Keyed) and other.frozen == self.frozen


@lru_cache(maxsize=KEPT_FIGURES)
def _built(keyed: _Keyed) -> go.Figure:
    # Never handed out but to be read (its JSON, its height), so sessions share it safely.
    return keyed.drawing.figure()


def _keyed(drawing: Drawing) -> _Keyed | None:
    """The drawing as a cache key, or None when an argument cannot be compared (a numpy array)."""
    try:
        return _Keyed(drawing, drawing.key())
    except TypeError:
        return None


def kept_figure(drawing: Drawing) -> go.Figure:
    """The figure the drawing makes: the one built the first time its calls were made (read it,
    never change it), or a new one when an argument cannot be compared (a numpy array)."""
    keyed = _keyed(drawing)
    return drawing.figure() if keyed is None else _built(keyed)


@lru_cache(maxsize=KEPT_FIGURES)
def _kept_payload(keyed: _Keyed) -> tuple[str, int]:
    return _payload(_built(keyed))


def _payload(figure: go.Figure) -> tuple[str, int]:
    spec = figure.to_dict()  # what plotly.io.to_json(figure) writes, less plotly.py's default template:
    spec["layout"].pop("template", None)  # assets/chart.js draws in the page's look instead (2/3 of fine-tuning's JSON)
    return plotly.io.to_json(spec, validate=False), int(figure.layout.height or DEFAULT_HEIGHT)


def chart_payload(drawing: Drawing) -> tuple[str, int]:
    """The figure the drawing makes as the JSON plotly.js reads, and its height in pixels:
    written from the calls (guide/chart_spec.py) when it knows them all, else built by
    plotly.py once per drawing, like the figure."""
    try:
        spec = chart_spec.written(drawing.calls)
    except chart_spec.Unwritten:
        keyed = _keyed(drawing)
        return _payload(drawing.figure()) if keyed is None else _kept_payload(keyed)
    # plotly.io's own writer (plotly's encoder, compact), as for a figure built by plotly.py
    return plotly.io.to_json(spec, validate=False), int(spec["layout"].get("height") or DEFAULT_HEIGHT)


# One component for every chart (assets/chart.js); its element is identified by its key alone,
# so a chart keeps its place from one run to the next.
_CHART = st.components.v2.component(
    CHART_COMPONENT, html="<div class='guide-chart'></div>",
    js=(ROOT / "assets" / "chart.js").read_text(encoding="utf-8"),
    isolate_styles=False)  # plotly.js styles its plots from the page's <head>


def show_chart(drawing: Drawing, key: str) -> None:
    """Draw the figure on the page: the chart takes each new figure in place (Plotly.react) and
    draws it when it is on screen or near; its height is held for it before it is drawn.
    st.plotly_chart is not used: it makes a new element, drawn from scratch, whenever the
    figure changes (docs/design.md)."""
    spec, height = chart_payload(drawing)
    _CHART(key=f"chart-{key}", height=height, data={"figure": spec, "source": f"{base_path()}{PLOTLY_PATH}",
                                                    "unavailable": t("frame.chart_unavailable")})


def base_layout(fig: Drawing, x_title: str, y_title: str, lang: str = "en", height: int = 380) -> Drawing:
    fig.update_layout(
        separators=", " if lang == "fr" else ".,",  # decimal mark, then thousands separator
        height=height, margin=dict(l=10, r=10, t=30, b=10), xaxis_title=x_title, yaxis_title=y_title,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0), hovermode="x unified",
    )
    return fig


def level_line(fig: Drawing, y: float, label: str, dash: str = "dash", color: str = "#d62728") -> None:
    """A horizontal line across the plot at `y`, its label above its left end: the shape and the
    annotation plotly's add_hline(annotation_position="top left") makes, written out (add_hline
    works them out through every subplot: ~2.5 ms a figure here, ~0.6 for these two calls)."""
    fig.add_shape(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=y, y1=y, line=dict(color=color, dash=dash))
    fig.add_annotation(text=label, showarrow=False, xref="x domain", x=0, xanchor="left", yref="y", y=y,
                       yanchor="bottom")


def mark_line(fig: Drawing, x: float, label: str, dash: str = "dot", color: str = "#2ca02c") -> None:
    """A vertical line at `x`, its label at the top, right of the line: add_vline's shape and
    annotation (annotation_position="top right"), written out like `level_line`."""
    fig.add_shape(type="line", xref="x", x0=x, x1=x, yref="y domain", y0=0, y1=1, line=dict(color=color, dash=dash))
    fig.add_annotation(text=label, showarrow=False, xref="x", x=x, xanchor="left", yref="y domain", y=1,
                       yanchor="top")


def capacity_line(fig: Drawing, capacity_bytes: int, label: str) -> None:
    level_line(fig, capacity_bytes / GIB, label)


def stacked_memory(x: list, parts: dict[str, list[int]], x_title: str, y_title: str, lang: str = "en",
                   colors: dict[str, str] | None = None) -> Drawing:
    """Stacked bars of byte counts (shown in GiB); `colors`: a bar colour per part's name."""
    fig = Drawing()
    for name, values in parts.items():
        if colors and name in colors:
            fig.add_bar(x=x, y=[v / GIB for v in values], name=name, marker_color=colors[name])
        else:
            fig.add_bar(x=x, y=[v / GIB for v in values], name=name)
    fig.update_layout(barmode="stack", legend_traceorder="normal")
    fig.update_xaxes(type="category")  # batch sizes 1, 2, 4... evenly spaced, not on a linear scale
    return base_layout(fig, x_title, y_title, lang)
