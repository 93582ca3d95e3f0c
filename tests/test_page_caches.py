"""The caches behind a fast case change: engine peaks kept by their inputs
(calculator/core/memo.py) and figures built once per drawing (guide/charts.py). Each keeps
exactly what the uncached code gives, is bounded, and hands sessions nothing they could change
for each other."""

from __future__ import annotations

import dataclasses
import json

import plotly
import plotly.graph_objects as go
import plotly.io
import pytest
from streamlit.testing.v1 import AppTest

from calculator.core.memo import Same, kept_by_inputs
from calculator.memory.inference import inference_memory
from calculator.models.seam import catalog_model
from guide import charts
from guide.charts import Drawing, KEPT_FIGURES, kept_figure, level_line, mark_line
from guide.http import PLOTLY_PATH
from tests.apptest import chart_elements

LLAMA = catalog_model("llama-3-8b")


def test_a_kept_peak_is_the_computed_one_and_frozen():
    computed = inference_memory.__wrapped__(LLAMA.summary, LLAMA.spec, 3, prompt=700, new_tokens=50)
    kept = inference_memory(LLAMA.summary, LLAMA.spec, 3, prompt=700, new_tokens=50)
    assert kept == computed
    assert inference_memory(LLAMA.summary, LLAMA.spec, 3, prompt=700, new_tokens=50) is kept  # kept, not redone
    with pytest.raises(dataclasses.FrozenInstanceError):
        kept.total_bytes = 0  # shared between sessions: it cannot be changed
    other = inference_memory(LLAMA.summary, LLAMA.spec, 3, prompt=701, new_tokens=50)
    assert other.total_bytes > kept.total_bytes  # another input is another entry


def test_kept_by_inputs_keys_by_identity_bounds_and_skips_unhashable_inputs():
    calls = []

    @kept_by_inputs(maxsize=2)
    def total(counts: dict, scale, **options):
        calls.append(1)
        return sum(counts.values()) * (scale if isinstance(scale, int) else len(scale))

    one, same_content = {"a": 1}, {"a": 1}
    assert total(one, 2) == total(one, 2) == 2 and len(calls) == 1
    assert total(same_content, 2) == 2 and len(calls) == 2  # another object: not taken for the first
    assert total(one, [1, 2, 3]) == 3 and total(one, [1, 2, 3]) == 3 and len(calls) == 4  # a list: computed
    total(one, 3), total(one, 4)
    assert total.cache_info().currsize == 2  # bounded
    assert Same(one) == Same(one) and Same(one) != Same(same_content)


def _by_hand() -> go.Figure:
    fig = go.Figure()
    fig.add_bar(x=["1", "2"], y=[1.5, 2.0], name="weights", marker_color="#123456")
    fig.update_layout(barmode="stack", height=300)
    fig.add_hline(y=2.5, line_dash="dash", line_color="#d62728", annotation_text="usable", annotation_position="top left")
    fig.add_vline(x=1, line_dash="dot", line_color="#2ca02c", annotation_text="largest", annotation_position="top right")
    return fig


def _drawing(height=300) -> Drawing:
    fig = Drawing()
    fig.add_bar(x=["1", "2"], y=[1.5, 2.0], name="weights", marker_color="#123456")
    fig.update_layout(barmode="stack", height=height)
    level_line(fig, 2.5, "usable")  # add_hline's and add_vline's shapes and labels, written out
    mark_line(fig, 1, "largest")
    return fig


def test_a_drawing_makes_the_figure_plotly_makes_from_the_same_calls():
    assert kept_figure(_drawing()).to_dict() == _by_hand().to_dict()


def test_the_same_calls_are_built_once_and_any_difference_builds_another():
    first = kept_figure(_drawing())
    assert kept_figure(_drawing()) is first
    assert kept_figure(_drawing(height=300.0)) is not first  # 300 and 300.0 are written differently in JSON
    assert kept_figure(_drawing(height=301)).layout.height == 301
    assert charts._built.cache_info().maxsize == KEPT_FIGURES


def test_an_argument_that_cannot_be_compared_is_drawn_not_kept():
    import numpy as np

    drawing = Drawing().add_bar(x=np.arange(3), y=np.array([1.0, 2.0, 3.0]))
    assert kept_figure(drawing) is not kept_figure(drawing)
    assert list(kept_figure(drawing).data[0].y) == [1.0, 2.0, 3.0]
    with pytest.raises(AttributeError):
        Drawing().write_html("chart.html")  # only the calls it can replay


def _two_charts() -> None:
    import streamlit as st

    from guide.charts import Drawing, show_chart

    height = int(st.query_params.get("height", "300"))
    fig = Drawing().add_bar(x=["1", "2"], y=[1.5, 2.0], name="weights")
    fig.update_layout(height=height)
    show_chart(fig, key="one")
    show_chart(fig, key="two")


def test_sessions_share_a_kept_figure_without_changing_it():
    drawing = Drawing().add_bar(x=["1", "2"], y=[1.5, 2.0], name="weights").update_layout(height=300)
    kept = kept_figure(drawing)
    before = kept.to_dict()
    sessions = [AppTest.from_function(_two_charts) for _ in range(2)]
    sessions[1].query_params["height"] = "410"
    specs = [[json.loads(json.loads(c.json)["figure"]) for c in chart_elements(at.run())] for at in sessions]
    assert [s["layout"]["height"] for s in specs[0]] == [300, 300]
    assert [s["layout"]["height"] for s in specs[1]] == [410, 410]  # the other session's case, its own figure
    assert specs[0][0]["data"] == json.loads(plotly.io.to_json(before))["data"]
    # the figure as plotly writes it, less its default template (assets/chart.js draws in the page's look)
    plotlys = json.loads(plotly.io.to_json(before))
    assert "template" in plotlys["layout"] and "template" not in specs[0][0]["layout"]
    del plotlys["layout"]["template"]
    assert specs[0][0] == plotlys
    assert kept_figure(drawing) is kept and kept.to_dict() == before  # drawing it changed nothing


def test_a_chart_is_known_by_its_key_alone_and_holds_its_height():
    """The page keeps a chart's element from one run to the next when its figure changes
    (st.plotly_chart's element id is hashed from the figure: a new element, drawn from scratch);
    the space the figure takes is held for it before plotly.js draws it."""
    at = AppTest.from_function(_two_charts)
    first = chart_elements(at.run())
    at.query_params["height"] = "410"
    second = chart_elements(at.run())
    assert [c.id for c in first] == [c.id for c in second] and first[0].id != first[1].id
    assert [json.loads(c.json)["figure"] for c in first] != [json.loads(c.json)["figure"] for c in second]
    assert charts.chart_payload(Drawing().add_bar(x=[1], y=[2]).update_layout(height=410))[1] == 410
    assert charts.chart_payload(Drawing().add_bar(x=[1], y=[2]))[1] == charts.DEFAULT_HEIGHT == 450  # plotly's
    source = json.loads(second[0].json)["source"]
    assert source == PLOTLY_PATH and source.endswith(f"plotly-{plotly.__version__}.min.js")
    # what the chart says if plotly.js cannot load, in the page's language
    from calculator.core.messages import text

    assert json.loads(second[0].json)["unavailable"] == text("frame.chart_unavailable", "en")
    at.query_params["lang"] = "fr"
    assert json.loads(chart_elements(at.run())[0].json)["unavailable"] == text("frame.chart_unavailable", "fr")


def test_the_sampled_simulation_is_the_simulation_of_the_sampled_lengths_and_is_kept():
    from calculator.core.gpus import gpu
    from calculator.memory.length_order import sample_lengths, simulate, simulate_sampled
    from calculator.memory.speed import prefill

    card = gpu("l4")
    seconds = lambda t: prefill(LLAMA.summary, LLAMA.spec, card, "bfloat16", 8, t).seconds  # noqa: E731
    direct = simulate(sample_lengths(3000, 300, 4000), 8, 2000, seconds)
    kept = simulate_sampled(LLAMA.summary, LLAMA.spec, card, "bfloat16", 8, 3000, 300, 4000, 2000)
    assert list(kept) == direct and isinstance(kept, tuple)  # a tuple of frozen runs: nothing to change
    assert simulate_sampled(LLAMA.summary, LLAMA.spec, card, "bfloat16", 8, 3000, 300, 4000, 2000) is kept
    assert simulate_sampled(LLAMA.summary, LLAMA.spec, card, "bfloat16", 9, 3000, 300, 4000, 2000) != kept


def test_a_kept_quantized_count_is_the_computed_one():
    from calculator.memory.quantization import FORMATS, quantize_model

    for fmt in FORMATS[:6]:
        kept = quantize_model(LLAMA.summary, LLAMA.spec, fmt)
        assert kept == quantize_model.__wrapped__(LLAMA.summary, LLAMA.spec, fmt)
        assert quantize_model(LLAMA.summary, LLAMA.spec, fmt) is kept
        with pytest.raises(dataclasses.FrozenInstanceError):
            kept.total_bytes = 0


def test_widgets_draw_charts_through_show_chart():
    from pathlib import Path

    widgets = Path(__file__).resolve().parent.parent / "guide"
    direct = [p.name for p in widgets.rglob("*.py") if "st.plotly_chart(" in p.read_text()
              or (p.name != "charts.py" and "plotly.io" in p.read_text())]
    assert direct == [], f"draw with guide.charts.show_chart (built once per drawing): {direct}"


def test_a_kept_training_peak_is_the_computed_one_and_nothing_can_change_it():
    import copy
    import pickle

    from calculator.training import Layout, TrainingSetup, training_memory

    setup, layout = TrainingSetup(method="lora", micro_batch=3, sequence=1024), Layout(2, zero=2)
    computed = training_memory.__wrapped__(LLAMA.summary, LLAMA.spec, setup, layout, LLAMA.traits)
    kept = training_memory(LLAMA.summary, LLAMA.spec, setup, layout, LLAMA.traits)
    assert kept == computed and kept.to_json() == computed.to_json()
    assert training_memory(LLAMA.summary, LLAMA.spec, setup, layout, LLAMA.traits) is kept
    assert sum(kept.at_peak.values()) == kept.total_bytes and json.loads(json.dumps(kept.to_json())) == kept.to_json()
    with pytest.raises(dataclasses.FrozenInstanceError):
        kept.total_bytes = 0
    for change in (lambda d: d.__setitem__("weights", 0), lambda d: d.update(weights=0), lambda d: d.pop("weights"),
                   lambda d: d.clear(), lambda d: d.setdefault("other", 1), lambda d: d.__delitem__("weights")):
        with pytest.raises(TypeError):
            change(kept.at_peak)  # shared between sessions: its components cannot be changed either
    assert copy.deepcopy(kept) == kept and pickle.loads(pickle.dumps(kept)) == kept
    other = training_memory(LLAMA.summary, LLAMA.spec, dataclasses.replace(setup, micro_batch=4), layout, LLAMA.traits)
    assert other.activations_bytes > kept.activations_bytes  # another input is another entry
    assert training_memory.cache_info().maxsize == 4096


def test_a_kept_activation_model_is_the_computed_one():
    from calculator.training import TrainingSetup
    from calculator.training.activations import activation_model

    setup = TrainingSetup(method="lora", micro_batch=3, sequence=1024)
    for tensor, sequence_parallel in ((1, True), (2, False), (4, True)):
        computed = activation_model.__wrapped__(LLAMA.summary, LLAMA.spec, LLAMA.traits, setup, tensor, sequence_parallel)
        kept = activation_model(LLAMA.summary, LLAMA.spec, LLAMA.traits, setup, tensor, sequence_parallel)
        assert kept == computed and activation_model(LLAMA.summary, LLAMA.spec, LLAMA.traits, setup, tensor,
                                                     sequence_parallel) is kept
    with pytest.raises(dataclasses.FrozenInstanceError):
        kept.layer_input = 0
    bigger = activation_model(LLAMA.summary, LLAMA.spec, LLAMA.traits, dataclasses.replace(setup, micro_batch=4))
    assert bigger.layer_input > activation_model(LLAMA.summary, LLAMA.spec, LLAMA.traits, setup).layer_input
    assert activation_model.cache_info().maxsize == 512


def test_kept_weight_bytes_and_dtype_names_are_the_computed_ones():
    from calculator.core.errors import CalculatorError
    from calculator.core.precision import normalize_dtype
    from calculator.memory.speed import _weight_bytes

    for dtype in ("bfloat16", "float32", "int4", "gptq-4bit", "bnb-nf4"):
        kept = _weight_bytes(LLAMA.summary, LLAMA.spec, dtype)
        assert kept == _weight_bytes.__wrapped__(LLAMA.summary, LLAMA.spec, dtype)
        assert _weight_bytes(LLAMA.summary, LLAMA.spec, dtype) is kept
    assert [normalize_dtype(name) for name in ("bf16", " Torch.Float16 ", "bf16")] == ["bfloat16", "float16", "bfloat16"]
    for refused in ("bf17", "bf17", 16, None):  # refused each time, never kept
        with pytest.raises(CalculatorError):
            normalize_dtype(refused)


def test_kept_training_searches_are_the_computed_ones():
    from calculator.core.budget import Budget
    from calculator.core.gpus import gpu
    from calculator.training import TrainingSetup, fewest_gpus, largest_micro_batch
    from calculator.training.inverse import _usable_counts

    budget, setup = Budget(gpu("a100-80gb")), TrainingSetup(sequence=1024)
    for strategy in ("ddp", "zero3", "tensor", "pipeline"):
        kept = fewest_gpus(LLAMA.summary, LLAMA.spec, budget, strategy, setup, LLAMA.traits)
        assert kept == fewest_gpus.__wrapped__(LLAMA.summary, LLAMA.spec, budget, strategy, setup, LLAMA.traits)
        assert fewest_gpus(LLAMA.summary, LLAMA.spec, budget, strategy, setup, LLAMA.traits) is kept
    largest = largest_micro_batch(LLAMA.summary, LLAMA.spec, budget, TrainingSetup(method="lora"))
    assert largest == largest_micro_batch.__wrapped__(LLAMA.summary, LLAMA.spec, budget, TrainingSetup(method="lora"))
    # Llama 3 8B: 32 heads, 32 layers. Tensor parallelism stays in a node and divides the heads;
    # a pipeline has at most one stage a layer; DDP never needs more than one GPU's try.
    assert _usable_counts("tensor", LLAMA.spec, 4096) == (1, 2, 4, 8)
    assert _usable_counts("pipeline", LLAMA.spec, 4096) == (1, 2, 3, 4, 5, 6, 7, 8, 16, 24, 32)
    assert _usable_counts("ddp", LLAMA.spec, 4096) == (1,)
    assert len(_usable_counts("zero3", LLAMA.spec, 4096)) == 8 + 4096 // 8 - 1


def test_kept_path_parses_are_plotlys_and_build_the_same_figures(monkeypatch):
    import plotly.basedatatypes as base

    kept = base._str_to_dict_path_full
    assert kept.kept_parse  # guide.charts is imported: plotly's parse is kept
    plotly_parse = kept.plotly_parse
    for path in ("marker_color", "line_dash", "annotation_position", "legend_traceorder", "xaxis.title.text",
                 "error_x_thickness", "shapes[0].line.width", "layout.xaxis2_range[1]", "", "a__b_"):
        assert kept(path) == plotly_parse(path) and kept(path) == kept(path)
        assert kept(path)[1] is not kept(path)[1]  # each caller its own list of positions

    def built() -> dict:
        fig = go.Figure()
        fig.add_bar(x=["1", "2"], y=[1.5, 2.0], name="weights", marker_color="#123456", error_y_thickness=2)
        fig.update_layout(barmode="stack", legend_traceorder="normal", xaxis_title="batch", height=300)
        fig.add_hline(y=2.5, line_dash="dash", line_color="#d62728", annotation_text="usable",
                      annotation_position="top left")
        return fig.to_dict()

    with_kept = built()
    monkeypatch.setattr(base, "_str_to_dict_path_full", plotly_parse)
    assert built() == with_kept


def test_the_chart_comparison_finds_a_changed_a_missing_and_an_added_chart():
    from bench.charts_json import differences

    before = {"oom en default 0": '{"data": [1], "layout": {"a": 1, "b": 2}}', "oom en default 1": '{"data": []}'}
    after = {"oom en default 0": '{"layout": {"b": 2, "a": 1}, "data": [1]}', "oom fr default 0": '{"data": []}'}
    assert differences(before, before) == []
    assert differences(before, after) == ["oom en default 1: only before", "oom fr default 0: only after"]
    after["oom en default 0"] = '{"data": [1.0001], "layout": {"a": 1, "b": 2}}'
    assert "oom en default 0: differs" in differences(before, after)


def test_a_ui_string_without_a_link_does_not_read_the_case(monkeypatch):
    from guide import case_bar
    from guide.widgets import Context

    reads = []
    monkeypatch.setattr(case_bar, "carried_query", lambda lang: reads.append(lang) or {"model": "gpt2"})
    ctx = Context(lang="fr", slug="oom", anchor="top")
    assert ctx.localized("Taille du lot : 8") == "Taille du lot : 8" and reads == []  # ~2,000 such strings a run
    assert ctx.localized("Voir [le chapitre](oom#batch-size).") == \
        "Voir [le chapitre](oom?model=gpt2&lang=fr#batch-size)." and reads == ["fr"]


def test_forget_kept_empties_every_answer_kept_by_its_inputs():
    """Tests that patch the engine forget every kept answer at once (core.memo.forget_kept):
    every kept_by_inputs cache of the engine is among them."""
    from calculator.core.memo import forget_kept
    from calculator.training import TrainingSetup, training_memory
    from calculator.training.activations import activation_model

    setup = TrainingSetup(method="lora", micro_batch=2, sequence=512)
    training_memory(LLAMA.summary, LLAMA.spec, setup, traits=LLAMA.traits)
    assert training_memory.cache_info().currsize and activation_model.cache_info().currsize
    forget_kept()
    assert training_memory.cache_info().currsize == activation_model.cache_info().currsize == 0
