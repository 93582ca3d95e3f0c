"""guide/chart_spec.py: a drawing's figure written without plotly.py is plotly.py's figure, to
the last key and number type; what it cannot write the same way it refuses, and plotly.py
builds that figure. (Every chart the page tests draw is also checked, tests/conftest.py.)"""

from __future__ import annotations

import json
import math

import pytest

from guide import charts
from guide.chart_spec import Unwritten, written
from guide.charts import Drawing, base_layout, level_line, mark_line, stacked_memory
from tests.conftest import _canonical, _plotly_spec


def _every_kind_of_call() -> Drawing:
    fig = Drawing()
    fig.add_bar(x=["1", "2"], y=[1.5, 2], name="weights", marker_color="#123456", marker_line_width=0)
    fig.add_scatter(x=(1, 2), y=[3.0, 4.0], mode="lines+markers", line=dict(color="red", dash="dot"), line_width=2)
    base_layout(fig, "Batch", "GiB", lang="fr", height=300)  # titles given as text, nested dicts, names as paths
    fig.update_layout(legend=dict(title="Parts"), legend_traceorder="normal", barmode="stack", bargap=0.25)
    fig.update_layout(legend=dict(x=0.5))  # merges into the legend already set, as plotly.py's update does
    fig.update_xaxes(type="category").update_yaxes(range=[0, 4.5], title_font_size=11)
    level_line(fig, 2.5, "usable")
    mark_line(fig, 1, "largest")
    return fig


def test_every_kind_of_call_the_pages_make_is_written_as_plotly_writes_it():
    fig = _every_kind_of_call()
    spec = written(fig.calls)
    assert _canonical(spec) == _plotly_spec(fig.calls)
    assert spec["layout"]["legend"] == {"title": {"text": "Parts"}, "traceorder": "normal", "orientation": "h",
                                        "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0.5}
    assert spec["layout"]["yaxis"]["title"] == {"text": "GiB", "font": {"size": 11}}


def test_the_check_of_the_tests_tells_a_wrong_spec():
    fig = _every_kind_of_call()
    spec = written(fig.calls)
    spec["layout"]["height"] = 300.0  # the same number to Python, another one in JSON
    assert _canonical(spec) != _plotly_spec(fig.calls)


def test_a_chart_on_the_page_is_the_written_spec_and_its_height():
    fig = _every_kind_of_call()
    text, height = charts.chart_payload(fig)
    assert json.loads(text) == written(fig.calls) and height == 300
    assert charts.chart_payload(Drawing().add_bar(x=[1], y=[2]))[1] == charts.DEFAULT_HEIGHT


@pytest.mark.parametrize("calls", [
    [("add_bar", (), {"x": bytearray(b"ab"), "y": [1, 2]})],  # plotly.py reads other sequences
    [("add_bar", (), {"x": [1], "y": [math.nan]})],  # plotly.py writes NaN as null
    [("add_bar", (), {"x": [1], "y": [2], "yaxis": "y2"})],  # a second axis
    [("update_layout", (), {"yaxis2": {"overlaying": "y"}})],
    [("update_layout", (dict(height=300),), {})],  # a positional dict
    [("update_layout", (), {"annotations": [{"text": "a"}]})],  # a list of items replaced
    [("update_layout", (), {"template": "plotly_dark"})],  # a template (the page sends none)
    [("add_bar", (), {"x": [1], "y": [2], "customdata": [{"a": 1}]})],  # a dict inside a list
    [("update_xaxes", (), {"type": "log", "row": 1})],  # one subplot's axis
    [("add_shape", (), {"type": "line", "xref": "x3", "x0": 0, "x1": 1})],
    [("add_annotation", (), {"text": "a", "xref": "x2 domain", "x": 0})],
    [("add_histogram", (), {"x": [1, 2]})],  # a call it does not know
])
def test_what_plotly_would_change_is_left_to_plotly(calls):
    with pytest.raises(Unwritten):
        written(calls)


def test_a_chart_the_writer_leaves_is_drawn_by_plotly():
    import numpy as np

    drawing = Drawing().add_bar(x=[1, 2], y=[math.nan, 2.0]).add_scatter(x=np.arange(2), y=[1, 2], yaxis="y2")
    drawing.update_layout(yaxis2=dict(overlaying="y", side="right"))
    spec = json.loads(charts.chart_payload(drawing)[0])
    assert spec["data"][0]["y"] == [None, 2.0]  # NaN written as null
    assert spec["data"][1]["x"]["dtype"] == "i1"  # a numpy array as plotly.py's typed array (base64)
    assert spec["layout"]["yaxis2"] == {"overlaying": "y", "side": "right"}


def test_the_stacked_chart_of_the_memory_pages_is_written():
    fig = stacked_memory(["1", "2"], {"weights": [2**30, 2**30], "KV cache": [2**29, 2**30]}, "Batch", "GiB", "en")
    assert _canonical(written(fig.calls)) == _plotly_spec(fig.calls)
