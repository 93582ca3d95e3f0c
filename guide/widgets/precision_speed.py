"""slow-model#precision: memory and expected speed of one model in each precision."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from calculator.speed import generation
from guide.charts import base_layout
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, share_box
from guide.widgets.common import gpu_picker, model_picker, tokens_input

KEYS = ("pr_model", "pr_gpu", "pr_prompt", "pr_batch")
SHOWN = ("float32", "float16", "bfloat16", "int8", "int4")


def render(ctx: Context) -> None:
    lang = ctx.lang
    c1, c2 = st.columns(2)
    model = model_picker(ctx, "pr_model", container=c1)
    gpu = gpu_picker(ctx, "pr_gpu", container=c2)
    c3, c4 = st.columns(2)
    prompt = tokens_input(ctx, "batch_size.prompt", "pr_prompt", 1024, container=c3)
    batch = tokens_input(ctx, "precision.batch", "pr_batch", 1, high=4096, container=c4, step=1)
    rows, speeds = [], []
    for dtype in SHOWN:
        weights = model.summary.total_bytes_at(dtype)
        run = generation(model.summary, model.spec, gpu, dtype, batch, prompt, 256)
        speeds.append(run.tokens_per_second)
        rows.append({
            ctx.t("common.dtype"): dtype,
            ctx.t("precision.col_weights"): format_bytes(weights, lang),
            ctx.t("precision.col_fits"): "✓" if weights <= gpu.memory_bytes else "✗",
            ctx.t("batch_size.col_ttft"): format_number(run.time_to_first_token * 1000, 1, lang),
            ctx.t("batch_size.col_throughput"): format_number(run.tokens_per_second, 0, lang),
        })
    st.dataframe(rows, hide_index=True)
    fig = go.Figure(go.Bar(x=list(SHOWN), y=speeds, marker_color=["#9aa5b1", "#6baed6", "#3366cc", "#2ca02c", "#17becf"]))
    base_layout(fig, ctx.t("common.dtype"), ctx.t("precision.speed_axis"), lang, height=300)
    st.plotly_chart(fig, config={"displayModeBar": False}, key="pr_chart")
    bf16, int4 = speeds[SHOWN.index("bfloat16")], speeds[SHOWN.index("int4")]
    st.caption(ctx.t("precision.caption", ratio=format_number(int4 / bf16, 1, lang), gpu=gpu.name))
    share_box(ctx, KEYS)


WIDGET = Widget(
    name="precision-speed",
    render=render,
    params=(Param("pr_model", "meta-llama/Llama-2-13b-hf"), Param("pr_gpu", "NVIDIA H100 SXM"),
            Param("pr_prompt", "128"), Param("pr_batch", "16")),
)

