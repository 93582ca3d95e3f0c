"""A drawing's figure as plotly.js reads it, written from the drawing's calls without plotly.py.

plotly.py checks every property it is given, through a validator per property, and that is
most of what a chart costs the server: a case change on the fine-tuning chapter spent 33 ms of
CPU building its six figures with plotly.py, 0.8 ms writing them here (oom 25 -> 1.8 ms,
serving 10 -> 0.3, slow-model 14 -> 0.4; bench/charts_json.py). A case change gives the
figures new data, so the figures guide/charts.py keeps by their calls rarely help there. What the figures need from plotly.py is
small: each trace call adds {"type": ..., its properties}, a shape or an annotation is appended
to the layout's list, update_layout and update_xaxes/update_yaxes merge into the layout,
"marker_color" means {"marker": {"color": ...}} (plotly.py's own parse of the name is used), and
a title given as text is {"text": ...}. Anything else (an argument plotly.py would convert, a
second axis, an index in a name) raises Unwritten and the figure is built by plotly.py as before.

The tests check each spec written here against plotly.py's own for every chart the pages draw
(tests/conftest.py): plotly.py's validation still runs there, where a mistake can fail.
"""

from __future__ import annotations

import math
import re

TRACES = {"add_bar": "bar", "add_scatter": "scatter"}
LISTS = {"add_shape": "shapes", "add_annotation": "annotations"}
AXES = {"update_xaxes": "xaxis", "update_yaxes": "yaxis"}
AXIS_OPTIONS = frozenset({"selector", "row", "col", "secondary_y", "patch", "overwrite"})
SCALARS = (str, int, float, bool, type(None))
# Left to plotly.py in update_layout: lists of items (its update has rules of its own for them)
# and a template (the page drops plotly.py's own)
LEFT_IN_LAYOUT = frozenset({"shapes", "annotations", "template"})
ONE_SUBPLOT = re.compile(r"[xy]axis\d+|[xy]\d+")  # a second axis, or a trace or shape drawn on one


class Unwritten(ValueError):
    """A call or an argument this writer does not know: plotly.py builds that figure."""


def written(calls: list[tuple[str, tuple, dict]]) -> dict:
    """The figure the calls make, as plotly.py's Figure.to_dict() writes it less its template."""
    data, layout = [], {}
    for name, args, kwargs in calls:
        if name in TRACES and not args:
            data.append(_merge({"type": TRACES[name]}, kwargs))
        elif name in LISTS and not args:
            layout.setdefault(LISTS[name], []).append(_merge({}, kwargs))
        elif name == "update_layout" and not args and not LEFT_IN_LAYOUT & set(kwargs):
            _merge(layout, kwargs)
        elif name in AXES and not args and not AXIS_OPTIONS & set(kwargs):
            _merge(layout.setdefault(AXES[name], {}), kwargs)
        else:
            raise Unwritten(name)
    if any(ONE_SUBPLOT.fullmatch(str(value)) for value in _axis_names(data, layout)):
        raise Unwritten("several subplots")
    return {"data": data, "layout": layout}


def _axis_names(data: list[dict], layout: dict):
    yield from layout
    for item in data + layout.get("shapes", []) + layout.get("annotations", []):
        yield from (item.get(key) for key in ("xaxis", "yaxis"))
        yield from (str(item.get(key, "")).split(" ")[0] for key in ("xref", "yref"))


def _merge(target: dict, update: dict) -> dict:
    """Merge the properties into `target`, as plotly.py's update does: a name such as
    "legend_traceorder" is a path, a dict merges into the dict already there."""
    for name, value in update.items():
        *parents, last = _path(name)
        node = target
        for part in parents:
            node = node.setdefault(part, {})
            if type(node) is not dict:
                raise Unwritten(name)
        if last == "title" and type(value) is str:
            value = {"text": value}  # plotly.py's title validator takes text for the title's text
        if type(value) is dict:
            if type(node.get(last)) is not dict:
                node[last] = {}
            _merge(node[last], value)
        else:
            node[last] = _plain(value, name)
    return target


def _path(name: str) -> tuple[str, ...]:
    import plotly.basedatatypes as base

    parts = base._str_to_dict_path_full(name)[0]  # guide/charts.py keeps these parses
    if not parts or not all(type(part) is str for part in parts):
        raise Unwritten(name)
    return tuple(parts)


def _plain(value, name: str):
    """A value plotly.py keeps as given (lists of numbers and texts): anything it would convert
    (a numpy array, a range, a dict in a list) or write differently (a NaN) is not written here."""
    if type(value) is float and not math.isfinite(value):
        raise Unwritten(name)
    if type(value) in SCALARS:
        return value
    if type(value) in (list, tuple) and not any(type(item) is dict for item in value):
        return [_plain(item, name) for item in value]
    raise Unwritten(name)
