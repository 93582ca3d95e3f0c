"""cpu-offloading#device-map: transformers' own placement of the case's model for a GPU budget
(by default what the case's GPU gives a process, less the headroom), the CPU memory the rest
needs (and the disk, under a CPU limit), bitsandbytes on the GPU with the offloaded layers
kept unquantized, the cost of streaming them, and the code that loads it."""

from __future__ import annotations

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.distributed.offload import QUANTIZATIONS, compact_map, default_gpu_budget, forward_cost, snippet
from calculator.distributed.offload_plan import plan_config
from calculator.core.precision import FLOAT_DTYPES
from calculator.answers.verdicts import card_chose_float16, compute_dtype_for, offload_limits
from guide.charts import Drawing, base_layout, show_chart
from calculator.core.units import GIB
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.common import case_inputs, tokens_input, url_choice

DTYPES = ("bfloat16", "float16", "float32")
COLOURS = {"gpu": "#2ca02c", "cpu": "#ff7f0e", "disk": "#d62728"}
# A case precision that is not a float dtype: the planner loads bfloat16 weights and, where
# bitsandbytes has the format, quantizes them on the GPU.
CASE_QUANTIZATION = {"int8": "bnb-int8", "int4": "bnb-nf4", "bnb-int8": "bnb-int8", "bnb-nf4": "bnb-nf4",
                     "bnb-nf4-dq": "bnb-nf4", "bnb-fp4": "bnb-fp4"}


def _device_label(device: str, ctx: Context) -> str:
    return ctx.t(f"offload.device_{device}") if device in ("cpu", "disk") else ctx.t("parallelism.gpu_label", n=int(device))


def weights_of(case_dtype: str) -> tuple[str, str]:
    """(load dtype, default quantization) for the case's precision."""
    if case_dtype in FLOAT_DTYPES:
        return case_dtype, "none"
    return "bfloat16", CASE_QUANTIZATION.get(case_dtype, "none")


def budget_input(ctx: Context, label: str, key: str, placeholder: str, high: int, container, step: int = 1):
    """A whole number of GiB bound to the URL, empty unless the reader or the link sets it."""
    value = container.number_input(ctx.t(label), min_value=0, max_value=high, value=None, step=step, key=key,
                                   bind="query-params", placeholder=placeholder)
    return int(value) if value is not None else None


def paste_answer(inputs, plan, cost, budget: int, gpus: int, gpu_gib: int | None, cpu_gib: int | None):
    """The offload command's answer for this plan (its JSON, as `offload --json` writes it)."""
    from calculator.answers.markdown import answer_for as answer_of
    from calculator.answers.offload_json import offload_json

    typed = inputs.model.key or inputs.model.name
    argv = [typed, "--gpu", inputs.card.key, "--dtype", plan.dtype, "--quantization", plan.quantization,
            "--gpus", str(gpus)]
    argv += ["--gpu-memory", f"{gpu_gib}GiB"] if gpu_gib is not None else []
    argv += ["--cpu-memory", f"{cpu_gib}GiB"] if cpu_gib is not None else []
    return answer_of("offload", offload_json(inputs.model, inputs.card, budget, gpus, plan, cost), tuple(argv), typed)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "om_model", "gpu": "om_gpu", "dtype": "om_dtype"}, dtypes=DTYPES)
    model, gpu = inputs.model, inputs.card
    dtype, case_quantization = weights_of(inputs.dtype)
    if dtype != inputs.dtype:
        st.caption(ctx.t("offload.case_precision", precision=inputs.dtype, dtype=dtype))
    dtype, precision = compute_dtype_for(gpu, dtype)  # float16 on a T4, as inference and speed
    if card_chose_float16(precision.value):
        st.caption(ctx.t("data_parallel.float16_note", gpu=gpu.name))
    c1, c2, c3, c4, c5 = st.columns([3, 2, 3, 3, 3])
    quantization = url_choice(ctx, ctx.t("offload.quantization"), "om_quant", QUANTIZATIONS,
                              lambda value: ctx.t(f"offload.quant_{value}"), default=case_quantization, container=c1,
                              help=ctx.t("offload.quantization_help"))
    gpus = tokens_input(ctx, "offload.gpus", "om_gpus", 1, high=8, container=c2, step=1)
    default_budget = default_gpu_budget(gpu)
    gpu_gib = budget_input(ctx, "offload.gpu_budget", "om_gpu_gib",
                           ctx.t("offload.gpu_budget_default", size=format_bytes(default_budget, lang)), 4096, c3)
    cpu_gib = budget_input(ctx, "offload.cpu_budget", "om_cpu_gib", ctx.t("offload.cpu_no_limit"), 65536, c4)
    disk_gib = budget_input(ctx, "offload.disk_budget", "om_disk_gib", ctx.t("offload.disk_no_limit"), 1_048_576, c5,
                            step=10)
    budget = gpu_gib * GIB if gpu_gib is not None else default_budget
    cpu_limit = cpu_gib * GIB if cpu_gib is not None else None
    if offload_limits(gpu, budget).figures["gpu_budget_over_card"]:
        st.warning(ctx.t("offload.budget_over_card", budget=format_bytes(budget, lang), gpu=gpu.name,
                         capacity=format_bytes(gpu.memory_bytes, lang)))
    if not model.config_json:
        show_error(ctx, CalculatorError("offload_no_config", model=model.name[:80]))
        return
    try:
        # Built and placed in a build worker, within its limits; only the plan comes back.
        with st.spinner(ctx.t("offload.building"), show_time=True):
            plan, _ = plan_config(model.config_json, [budget] * gpus, cpu_limit, dtype, quantization)
    except CalculatorError as error:
        show_error(ctx, error)
        return
    cost = forward_cost(plan, gpu)
    answer_with(ctx, paste_answer(inputs, plan, cost, budget, gpus, gpu_gib, cpu_gib))
    _chart(ctx, plan)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(ctx.t("offload.on_gpus"), format_bytes(plan.gpu_bytes, lang),
              help=ctx.t("offload.on_gpus_help", budget=format_bytes(budget, lang), n=gpus))
    m2.metric(ctx.t("offload.cpu_needed" if cpu_limit is None else "offload.on_cpu"), format_bytes(plan.cpu_bytes, lang),
              help=ctx.t("offload.cpu_needed_help"))
    m3.metric(ctx.t("offload.on_disk"), format_bytes(plan.disk_bytes, lang))
    m4.metric(ctx.t("offload.slowdown"), f"×{format_number(cost.slowdown, 1, lang)}")
    limits = offload_limits(gpu, budget, plan.disk_bytes, disk_gib * GIB if disk_gib is not None else None)
    _verdict(ctx, plan, cost, disk_gib, cpu_limit, limits.figures["disk_too_small"])
    st.dataframe([{
        ctx.t("offload.col_from"): first, ctx.t("offload.col_to"): last,
        ctx.t("offload.col_modules"): count, ctx.t("offload.col_device"): _device_label(device, ctx),
    } for first, last, device, count in compact_map(plan.device_map)], hide_index=True)
    explicit = plan.quantization != "none" and plan.offloaded
    st.caption(ctx.t("offload.snippet_caption_explicit" if explicit else "offload.snippet_caption"))
    st.code(snippet(model.load_id or model.name, model.summary.architecture, plan, lang), language="python")


def _chart(ctx: Context, plan) -> None:
    lang = ctx.lang
    fig = Drawing()
    for device, size in plan.bytes_by_device.items():
        kind = device if device in ("cpu", "disk") else "gpu"
        fig.add_bar(x=[size / GIB], y=[""], orientation="h", name=_device_label(device, ctx),
                    marker_color=COLOURS[kind], marker_line_color="white", marker_line_width=2,
                    text=[ctx.t("offload.bar_text", device=_device_label(device, ctx), size=format_bytes(size, lang))],
                    textposition="inside")
    fig.update_layout(barmode="stack", showlegend=False)
    base_layout(fig, ctx.t("common.memory_axis"), "", lang, height=160)
    fig.update_layout(hovermode="closest")
    show_chart(fig, key="om_chart")


def _verdict(ctx: Context, plan, cost, disk_gib: int | None, cpu_limit: int | None, disk_short: bool) -> None:
    lang = ctx.lang
    if disk_short:
        st.error(ctx.t("offload.disk_too_small", needed=format_bytes(plan.disk_bytes, lang), budget=disk_gib))
    elif plan.offloaded:
        st.warning(ctx.t("offload.cost", gpu_ms=format_number(cost.gpu_seconds * 1000, 1, lang),
                         cpu_ms=format_number(cost.cpu_seconds * 1000, 1, lang),
                         disk_ms=format_number(cost.disk_seconds * 1000, 1, lang),
                         link=cost.link, gbs=format_number(cost.link_gbs, 0, lang),
                         all_ms=format_number(cost.all_on_gpu_seconds * 1000, 1, lang),
                         slowdown=format_number(cost.slowdown, 1, lang)))
    else:
        st.success(ctx.t("offload.all_on_gpu", ms=format_number(cost.gpu_seconds * 1000, 1, lang)))
    if plan.offloaded and cpu_limit is None:
        st.markdown(ctx.t("offload.cpu_needed_text", cpu=format_bytes(plan.cpu_bytes, lang)))
    if plan.quantization != "none":
        key = "offload.quantized_offloaded" if plan.offloaded else "offload.quantized_on_gpu"
        st.info(ctx.t(key, dtype=plan.dtype, whole=format_bytes(plan.all_on_gpu_bytes, lang),
                      quantization=ctx.t(f"offload.quant_{plan.quantization}"),
                      stream=format_bytes(plan.largest_offloaded_bytes, lang)))


WIDGET = Widget(
    name="device-map",
    render=render,
    params=(Param("om_model", "mistralai/Mistral-7B-v0.1", "choice"), gpu_param("om_gpu", "NVIDIA A100 80GB SXM"),
            Param("om_dtype", "float32", "choice"), Param("om_quant", "bnb-nf4", "choice"),
            Param("om_gpus", "2", "int", given=(("om_gpu_gib", "6"),)),
            Param("om_gpu_gib", "8", "int"), Param("om_cpu_gib", "4", "int"),
            Param("om_disk_gib", "2", "int", given=(("om_cpu_gib", "1"),))),
)
