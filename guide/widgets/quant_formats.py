"""quantization#formats: a model and a GPU -> the memory of each real quantization format,
from the model's own matrices, and which formats fit."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from calculator.budget import Budget, readings_of
from calculator.inference import can_generate, inference_memory
from calculator.quantization import DEFAULT_GROUP_SIZE, GGUF_BLOCKS, GROUP_SIZES, quantize_all
from guide.charts import GIB, base_layout, capacity_line
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, gpu_param
from guide.widgets.common import case_inputs

MARKS = {"fits": "✓", "tight": "≈", "too_big": "✗"}
FAMILY_COLOURS = {"bf16": "#9aa5b1", "float8": "#8c564b", "bitsandbytes": "#3366cc", "gptq": "#2ca02c",
                  "awq": "#98df8a", "gguf": "#ff7f0e"}


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "qz_model", "gpu": "qz_gpu", "batch": "qz_batch", "prompt": "qz_prompt",
                               "new_tokens": "qz_new"})
    model, gpu = inputs.model, inputs.card
    group = st.selectbox(ctx.t("quantization.group_size"), list(GROUP_SIZES),
                         index=GROUP_SIZES.index(DEFAULT_GROUP_SIZE), key="qz_group", bind="query-params",
                         help=ctx.t("quantization.group_size_help"))
    results = quantize_all(model.summary, model.spec, group)
    budget = Budget(gpu)
    lengths = ({"prompt": inputs.prompt, "new_tokens": inputs.new_tokens} if can_generate(model.spec)
               else {"context": inputs.prompt})
    peaks = {r.format: inference_memory(model.summary, model.spec, inputs.batch, dtype=r.format if r.family != "bf16"
                                        else "bfloat16", group_size=group, **lengths) for r in results}
    verdicts = {name: readings_of(memory, budget).verdict for name, memory in peaks.items()}
    rows = []
    for r in results:
        rows.append({
            ctx.t("quantization.col_format"): r.format,
            ctx.t("quantization.col_bits"): format_number(r.bits_per_quantized_weight, 2, lang) if r.quantized_parameters else "16",
            ctx.t("quantization.col_quantized"): format_bytes(r.quantized_bytes, lang),
            ctx.t("quantization.col_kept"): format_bytes(r.kept_bytes + r.buffers_bytes, lang),
            ctx.t("quantization.col_total"): format_bytes(r.total_bytes, lang),
            ctx.t("quantization.col_real_bits"): format_number(r.bits_per_parameter, 2, lang),
            ctx.t("quantization.col_peak"): format_bytes(peaks[r.format].total_bytes, lang),
            ctx.t("quantization.col_fits"): MARKS[verdicts[r.format]],
            ctx.t("quantization.col_source"): layout_source(ctx, r.format, r.family),
        })
    st.dataframe(rows, hide_index=True)
    fig = go.Figure(go.Bar(x=[r.format for r in results], y=[r.total_bytes / GIB for r in results],
                           marker_color=[FAMILY_COLOURS[r.family] for r in results]))
    fig.update_xaxes(type="category")
    capacity_line(fig, budget.usable_bytes, ctx.t("common.usable_on", gpu=gpu.name))
    base_layout(fig, ctx.t("quantization.col_format"), ctx.t("common.memory_axis"), lang, height=340)
    st.plotly_chart(fig, config={"displayModeBar": False}, key="qz_chart")
    fitting = [r.format for r in results if verdicts[r.format] == "fits"]
    tight = [r.format for r in results if verdicts[r.format] == "tight"]
    run = ctx.t("quantization.run_of", batch=inputs.batch, tokens=format_number(peaks[results[0].format].context, 0, lang))
    if not fitting:
        st.error(ctx.t("quantization.none_fit", gpu=gpu.name, smallest=format_bytes(min(r.total_bytes for r in results), lang))
                 + " " + run)
    elif len(fitting) == len(results):
        st.success(ctx.t("quantization.all_fit", gpu=gpu.name) + " " + run)
    else:
        st.info(ctx.t("quantization.some_fit", gpu=gpu.name, formats=", ".join(fitting)) + " " + run)
    if tight:
        st.caption(ctx.t("quantization.tight", formats=", ".join(tight)))
    bnb = next(r for r in results if r.format == "bnb-nf4")
    gguf = next(r for r in results if r.format == "Q4_K")
    notes = [ctx.t("quantization.kept_note", kept=format_bytes(bnb.kept_bytes, lang),
                   share=format_number(100 * bnb.kept_bytes / bnb.total_bytes, 0, lang))]
    if model.summary.groups.get("experts") and model.spec.experts:
        notes.append(ctx.t("quantization.experts_note"))
    if gguf.fallback_parameters:
        notes.append(ctx.t("quantization.fallback_note", share=format_number(
            100 * gguf.fallback_parameters / gguf.quantized_parameters, 0, lang)))
    st.caption(" ".join(notes))


def layout_source(ctx: Context, name: str, family: str) -> str:
    """Where a format's layout comes from, in the reader's language (the calculator's own
    `source` is the English one the command line prints)."""
    if family == "gguf":
        weights, size = GGUF_BLOCKS[name]
        return ctx.t("quantization.source.gguf", block=f"block_{name.lower()}", bytes=size, weights=weights)
    return ctx.t(f"quantization.source.{name}")


WIDGET = Widget(
    name="quant-formats",
    render=render,
    params=(Param("qz_model", "mistralai/Mixtral-8x7B-v0.1"), gpu_param("qz_gpu", "NVIDIA A100 80GB SXM"),
            Param("qz_group", "32"), Param("qz_batch", "8"), Param("qz_prompt", "8192"), Param("qz_new", "2048")),
)
