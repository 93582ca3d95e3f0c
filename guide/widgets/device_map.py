"""cpu-offloading#device-map: accelerate's own placement of the real model for the reader's
GPU, CPU and disk budgets, the cost of streaming offloaded weights, and the code to load it."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from calculator import catalog
from calculator.offload import build_meta_model, compact_map, forward_cost, plan_device_map, snippet
from guide.charts import GIB, base_layout
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, share_box
from guide.widgets.common import dtype_picker, gpu_picker, model_picker, tokens_input

KEYS = ("om_model", "om_gpu", "om_dtype", "om_gpus", "om_gpu_gib", "om_cpu_gib", "om_disk_gib")
COLOURS = {"gpu": "#2ca02c", "cpu": "#ff7f0e", "disk": "#d62728"}


@st.cache_resource(max_entries=4, show_spinner=False)
def meta_model(key: str, dtype: str):
    """The catalog model on the meta device: a few MB of Python objects, built once."""
    return build_meta_model(catalog.config(key), dtype)


def _device_label(device: str, ctx: Context) -> str:
    return ctx.t(f"offload.device_{device}") if device in ("cpu", "disk") else ctx.t("parallelism.gpu_label", n=int(device))


def render(ctx: Context) -> None:
    lang = ctx.lang
    c1, c2, c3 = st.columns(3)
    model = model_picker(ctx, "om_model", container=c1)
    gpu = gpu_picker(ctx, "om_gpu", container=c2)
    dtype = dtype_picker(ctx, "om_dtype", container=c3, options=("bfloat16", "float16", "float32"))
    c4, c5, c6, c7 = st.columns(4)
    gpus = tokens_input(ctx, "offload.gpus", "om_gpus", 1, high=8, container=c4, step=1)
    gpu_gib = tokens_input(ctx, "offload.gpu_budget", "om_gpu_gib", 10, low=0, high=4096, container=c5, step=1)
    cpu_gib = tokens_input(ctx, "offload.cpu_budget", "om_cpu_gib", 32, low=0, high=65536, container=c6, step=1)
    disk_gib = tokens_input(ctx, "offload.disk_budget", "om_disk_gib", 200, low=0, high=1_048_576, container=c7, step=10)
    if gpu_gib * GIB > gpu.memory_bytes:
        st.warning(ctx.t("offload.budget_over_card", budget=gpu_gib, gpu=gpu.name,
                         capacity=format_bytes(gpu.memory_bytes, lang)))
    key = catalog.find(model.name).key
    # The first plan in a server process imports torch, transformers and accelerate (seconds).
    with st.spinner(ctx.t("offload.building"), show_time=True):
        model_on_meta = meta_model(key, dtype)
    plan = plan_device_map(model_on_meta, [gpu_gib * GIB] * gpus, cpu_gib * GIB, dtype)
    cost = forward_cost(plan, gpu)
    devices = list(plan.bytes_by_device)
    fig = go.Figure()
    for device in devices:
        kind = device if device in ("cpu", "disk") else "gpu"
        fig.add_bar(x=[plan.bytes_by_device[device] / GIB], y=[""], orientation="h", name=_device_label(device, ctx),
                    marker_color=COLOURS[kind], marker_line_color="white", marker_line_width=2,
                    text=[ctx.t("offload.bar_text", device=_device_label(device, ctx),
                                size=format_bytes(plan.bytes_by_device[device], lang))],
                    textposition="inside")
    fig.update_layout(barmode="stack", showlegend=False)
    base_layout(fig, ctx.t("common.memory_axis"), "", lang, height=160)
    fig.update_layout(hovermode="closest")
    st.plotly_chart(fig, config={"displayModeBar": False}, key="om_chart")
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(ctx.t("offload.on_gpus"), format_bytes(plan.gpu_bytes, lang))
    m2.metric(ctx.t("offload.on_cpu"), format_bytes(plan.cpu_bytes, lang))
    m3.metric(ctx.t("offload.on_disk"), format_bytes(plan.disk_bytes, lang))
    m4.metric(ctx.t("offload.slowdown"), f"×{format_number(cost.slowdown, 1, lang)}")
    if plan.disk_bytes > disk_gib * GIB:
        st.error(ctx.t("offload.disk_too_small", needed=format_bytes(plan.disk_bytes, lang), budget=disk_gib))
    elif plan.cpu_bytes or plan.disk_bytes:
        st.warning(ctx.t("offload.cost", gpu_ms=format_number(cost.gpu_seconds * 1000, 1, lang),
                         cpu_ms=format_number(cost.cpu_seconds * 1000, 1, lang),
                         disk_ms=format_number(cost.disk_seconds * 1000, 1, lang),
                         link=cost.link, gbs=format_number(cost.link_gbs, 0, lang),
                         all_ms=format_number(cost.all_on_gpu_seconds * 1000, 1, lang),
                         slowdown=format_number(cost.slowdown, 1, lang)))
    else:
        st.success(ctx.t("offload.all_on_gpu", ms=format_number(cost.gpu_seconds * 1000, 1, lang)))
    st.dataframe([{
        ctx.t("offload.col_from"): first, ctx.t("offload.col_to"): last,
        ctx.t("offload.col_modules"): count, ctx.t("offload.col_device"): _device_label(device, ctx),
    } for first, last, device, count in compact_map(plan.device_map)], hide_index=True)
    st.caption(ctx.t("offload.snippet_caption"))
    st.code(snippet(model.name, model.summary.architecture, [gpu_gib * GIB] * gpus, cpu_gib * GIB, dtype,
                    plan.disk_bytes > 0), language="python")
    share_box(ctx, KEYS)


WIDGET = Widget(
    name="device-map",
    render=render,
    params=(Param("om_model", "mistralai/Mistral-7B-v0.1"), Param("om_gpu", "NVIDIA T4"),
            Param("om_dtype", "float32"), Param("om_gpus", "2", given=(("om_gpu_gib", "6"),)),
            Param("om_gpu_gib", "8"), Param("om_cpu_gib", "4"),
            Param("om_disk_gib", "2", given=(("om_cpu_gib", "4"),))),
)
