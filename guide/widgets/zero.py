"""fine-tuning#zero: what one GPU holds as the number of GPUs grows, for a ZeRO stage, with
optional CPU offload; the ZeRO paper's model states next to DeepSpeed's estimator."""

from __future__ import annotations

import streamlit as st

from calculator.core.budget import Budget
from calculator.core.errors import CalculatorError
from calculator.training import ZERO_STAGES, Layout, training_memory
from guide.charts import capacity_line, show_chart
from guide.format import format_bytes
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.training import component_chart, number, peak_parts, train_answer, training_case



MARKS = {"fits": "✓", "tight": "≈", "too_big": "✗"}


def gpu_counts(top: int) -> list[int]:
    counts, n = [], 1
    while n < top:
        counts.append(n)
        n *= 2
    return counts + [top]


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs, setup = training_case(ctx, {"model": "ze_model", "gpu": "ze_gpu"})
    model, gpu = inputs.model, inputs.card
    budget = Budget(gpu)
    c3, c4 = st.columns(2)
    stage = c3.selectbox(ctx.t("zero.stage"), list(ZERO_STAGES), index=3, key="ze_stage", bind="query-params",
                         help=ctx.t("zero.stage_help"))
    top = number(ctx, "gpus", "ze_gpus", 16, 4096, container=c4)
    c5, c6, c7 = st.columns(3)
    offload = c5.checkbox(ctx.t("zero.offload"), key="ze_offload", bind="query-params", help=ctx.t("zero.offload_help"))
    offload_params = c6.checkbox(ctx.t("zero.offload_params"), key="ze_offload_params", bind="query-params",
                                 help=ctx.t("zero.offload_params_help"))
    deepspeed = c7.checkbox(ctx.t("zero.deepspeed"), key="ze_deepspeed", bind="query-params",
                            help=ctx.t("zero.deepspeed_help"))
    accounting = "deepspeed" if deepspeed else "paper"
    traits = model.traits
    counts = gpu_counts(int(top))
    try:
        memories = [training_memory(model.summary, model.spec, setup,
                                    Layout(n, zero=int(stage), offload_optimizer=offload,
                                           offload_parameters=offload_params, accounting=accounting), traits)
                    for n in counts]
    except CalculatorError as error:
        show_error(ctx, error)
        return
    fig = component_chart(ctx, [str(n) for n in counts], peak_parts(memories), ctx.t("zero.x_axis"))
    capacity_line(fig, budget.usable_bytes, ctx.t("common.usable_on", gpu=gpu.name))
    show_chart(fig, key="ze_chart")
    last = memories[-1]
    st.markdown(ctx.t(f"zero.formula_{stage}", n=counts[-1], states=format_bytes(last.model_state_bytes, lang)))
    if last.cpu_bytes:
        st.caption(ctx.t("zero.cpu", size=format_bytes(last.cpu_bytes, lang), n=counts[-1]))
    rows = []
    for other in ZERO_STAGES:
        paper = training_memory(model.summary, model.spec, setup, Layout(counts[-1], zero=other), traits)
        estimator = training_memory(model.summary, model.spec, setup,
                                    Layout(counts[-1], zero=other, accounting="deepspeed"), traits)
        rows.append({
            ctx.t("zero.stage"): other,
            ctx.t("zero.col_paper"): format_bytes(paper.model_state_bytes, lang),
            ctx.t("zero.col_deepspeed"): format_bytes(estimator.model_state_bytes + estimator.buffers_bytes, lang),
            ctx.t("training.column_peak"): format_bytes(paper.total_bytes, lang),
            ctx.t("training.column_fits"): MARKS[budget.readings(paper.total_bytes, paper.steady_bytes).verdict],
        })
    st.dataframe(rows, hide_index=True)
    st.caption(ctx.t("zero.caption", n=counts[-1]))
    layout = Layout(counts[-1], zero=int(stage), offload_optimizer=offload, offload_parameters=offload_params,
                    accounting=accounting)
    answer_with(ctx, paste_answer(inputs, setup, layout))


def paste_answer(inputs, setup, layout):
    """`train --gpus N --zero S`'s answer: one GPU's peak at the largest count the chart shows."""
    from calculator.answers.verdicts import largest_micro_batch_answer

    extra = ("--gpus", str(layout.gpus), "--zero", str(layout.zero),
             *(("--offload-optimizer",) if layout.offload_optimizer else ()),
             *(("--offload-params",) if layout.offload_parameters else ()),
             *(("--accounting", layout.accounting) if layout.accounting != "paper" else ()))
    answer = largest_micro_batch_answer(inputs.model, inputs.card, setup, layout)
    return train_answer(inputs, setup, answer, layout, extra=extra)


WIDGET = Widget(
    name="zero",
    render=render,
    params=(Param("ze_model", "meta-llama/Llama-2-13b-hf", "choice"), gpu_param("ze_gpu", "NVIDIA T4"), Param("ze_stage", "1", "int"),
            Param("ze_gpus", "64", "int"), Param("ze_offload", "true", "bool"),
            Param("ze_offload_params", "true", "bool", given=(("ze_offload", "true"),)),
            Param("ze_deepspeed", "true", "bool")),
)
