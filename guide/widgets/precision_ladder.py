"""quantization#precision-factor: the ideal ladder float32 -> bfloat16 -> int8 -> int4 for
one model: weights, the factor from float32, and the memory-bound decoding step."""

from __future__ import annotations

import streamlit as st

from calculator.core.budget import Budget
from calculator.memory.estimate import fit_verdict, weight_rounding
from calculator.core.precision import rule_of_thumb_bytes
from calculator.memory.quantization import ladder
from calculator.memory.speed import decode_step
from guide.charts import Drawing, base_layout, capacity_line, show_chart
from calculator.core.units import GIB
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, gpu_param
from guide.inputs.common import case_inputs

COLOURS = ["#9aa5b1", "#3366cc", "#2ca02c", "#17becf"]
MARKS = {"fits": "✓", "tight": "≈", "too_big": "✗"}


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "ql_model", "gpu": "ql_gpu"})
    model, gpu = inputs.model, inputs.card
    budget = Budget(gpu)
    steps = ladder(model.summary)
    rows, sizes = [], []
    for dtype, size, factor in steps:
        step = decode_step(model.summary, model.spec, gpu, dtype, 1, 1024)
        sizes.append(size)
        rows.append({
            ctx.t("common.dtype"): dtype,
            ctx.t("quantization.col_weights"): format_bytes(size, lang),
            ctx.t("quantization.col_factor"): f"÷{format_number(factor, 1, lang)}",
            ctx.t("quantization.col_fits"): MARKS[fit_verdict(size, rule_of_thumb_bytes(model.summary.parameters, dtype),
                                                              budget, weight_rounding(model.summary, dtype))],
            ctx.t("quantization.col_step"): format_number(step.seconds * 1000, 2, lang),
        })
    st.dataframe(rows, hide_index=True)
    fig = Drawing().add_bar(x=[d for d, _, _ in steps], y=[s / GIB for s in sizes], marker_color=COLOURS,
                            text=[format_bytes(s, lang) for s in sizes], textposition="outside")
    capacity_line(fig, budget.usable_bytes, ctx.t("common.usable_on", gpu=gpu.name))
    base_layout(fig, ctx.t("common.dtype"), ctx.t("common.memory_axis"), lang, height=320)
    show_chart(fig, key="ql_chart")
    bf16 = decode_step(model.summary, model.spec, gpu, "bfloat16", 1, 1024)
    int4 = decode_step(model.summary, model.spec, gpu, "int4", 1, 1024)
    st.caption(ctx.t("quantization.ladder_caption", gpu=gpu.name,
                     ratio=format_number(bf16.seconds / int4.seconds, 1, lang)))


WIDGET = Widget(
    name="precision-ladder",
    render=render,
    params=(Param("ql_model", "meta-llama/Llama-2-13b-hf", "choice"), gpu_param("ql_gpu", "NVIDIA T4")),
)
