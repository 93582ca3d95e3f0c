"""fine-tuning#lora: full fine-tuning, LoRA and QLoRA side by side for the reader's model,
rank and target modules, on their GPU."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from calculator.core.budget import Budget
from calculator.core.errors import CalculatorError
from calculator.training import METHODS, compare_methods, kbit_upcast_bytes, unconverted_expert_parameters
from guide.charts import capacity_line, show_chart
from guide.format import escape_markdown, format_bytes, format_count, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.training import component_chart, number, peak_parts, positions_note, \
    softcap_caveat, train_answer, training_case



def render(ctx: Context) -> None:
    lang = ctx.lang
    c4, c5 = st.columns([1, 2])
    rank = number(ctx, "lora_rank", "lo_rank", 16, 4096, container=c4)
    targets = c5.text_input(ctx.t("training.lora_targets"), value="all-linear", max_chars=300, key="lo_targets",
                            bind="query-params", help=ctx.t("training.lora_targets_help"))
    inputs, setup = training_case(ctx, {"model": "lo_model", "gpu": "lo_gpu", "precision": "lo_precision",
                                        "checkpointing": "lo_checkpointing", "batch": "lo_batch",
                                        "sequence": "lo_sequence"}, lora_rank=rank, lora_targets=targets)
    model, gpu, sequence = inputs.model, inputs.card, setup.sequence
    if positions_note(ctx, model, sequence):
        return
    budget = Budget(gpu)
    traits = model.traits
    try:
        methods = compare_methods(model.summary, model.spec, setup, traits=traits, capacity=budget)
    except CalculatorError as error:
        show_error(ctx, error)
        return
    lora, qlora = methods["lora"], methods["qlora"]
    upcast = kbit_upcast_bytes(model.summary, model.spec, replace(setup, method="qlora"))
    if upcast:
        st.warning(ctx.t("lora.moe_upcast", upcast=format_bytes(upcast, lang), experts=format_count(
            unconverted_expert_parameters(model.summary, model.spec), lang)))
    m1, m2 = st.columns(2)
    m1.metric(ctx.t("lora.trainable"), format_count(lora.trainable_parameters, lang),
              ctx.t("lora.share", percent=format_number(lora.trainable_percent, 2, lang)), delta_color="off",
              delta_arrow="off")
    m2.metric(ctx.t("lora.qlora_weights"), format_bytes(qlora.memory.weights_bytes, lang),
              ctx.t("lora.instead_of", size=format_bytes(lora.memory.weights_bytes, lang)), delta_color="off",
              delta_arrow="off")
    labels = {m: ctx.t(f"training.method_{m}") for m in METHODS}
    fig = component_chart(ctx, list(labels.values()), peak_parts([methods[m].memory for m in METHODS]), "")
    capacity_line(fig, budget.usable_bytes, ctx.t("common.usable_on", gpu=gpu.name))
    show_chart(fig, key="lo_chart")
    rows = []
    for method in METHODS:
        compared = methods[method]
        rows.append({
            ctx.t("training.method"): labels[method],
            ctx.t("lora.col_trained"): format_count(compared.trainable_parameters, lang),
            ctx.t("training.part_weights"): format_bytes(compared.memory.weights_bytes, lang),
            ctx.t("training.part_activations"): format_bytes(compared.memory.activations_bytes, lang),
            ctx.t("training.column_peak"): format_bytes(compared.memory.total_bytes, lang),
            ctx.t("lora.col_largest"): compared.largest_micro_batch,
        })
    st.dataframe(rows, hide_index=True)
    st.caption(ctx.t("lora.caption", targets=escape_markdown(targets, 80), rank=rank))
    softcap_caveat(ctx, model)
    answer_with(ctx, paste_answer(inputs, setup, methods, rank, targets))


def paste_answer(inputs, setup, methods, rank: int, targets: str):
    """`train --compare-methods`'s answer: the three methods' peaks and largest micro-batches."""
    from calculator.answers.verdicts import largest_micro_batch_answer

    answer = largest_micro_batch_answer(inputs.model, inputs.card, setup)
    extra = ("--lora-rank", str(rank), "--lora-targets", targets, "--compare-methods")
    return train_answer(inputs, setup, answer, methods=methods, extra=extra)


WIDGET = Widget(
    name="lora",
    render=render,
    params=(Param("lo_model", "Qwen/Qwen2.5-7B", "choice"), gpu_param("lo_gpu", "NVIDIA H100 SXM"), Param("lo_precision", "mixed", "choice"),
            Param("lo_rank", "64", "int"), Param("lo_targets", "q_proj,v_proj", "text"), Param("lo_batch", "2", "int"),
            Param("lo_sequence", "1024", "int"), Param("lo_checkpointing", "none", "choice")),
)
