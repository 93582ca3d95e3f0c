"""fine-tuning#distributed: data parallelism, ZeRO, tensor and pipeline parallelism and CPU
offload side by side on N GPUs for the reader's model, and the fewest GPUs each needs."""

from __future__ import annotations

import streamlit as st

from calculator.answers.training_json import STRATEGY_LABELS, fewest_pick
from calculator.core.budget import Budget
from calculator.core.errors import CalculatorError
from calculator.training import STRATEGIES, fewest_gpus, strategy_layout, training_memory
from guide.charts import GIB, capacity_line, show_chart
from guide.format import format_bytes, format_count
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.training import component_chart, number, peak_parts, positions_note, \
    train_answer, training_case

# Names of the strategies: technical terms, the same in both languages, except the word
# for offloading (distributed.label_offload).
MARKS = {"fits": "✓", "tight": "≈", "too_big": "✗"}
LABELS = STRATEGY_LABELS


def label(ctx: Context, strategy: str) -> str:
    return ctx.t("distributed.label_offload") if strategy == "zero3-offload" else LABELS[strategy]


def render(ctx: Context) -> None:
    lang = ctx.lang
    c3, c8 = st.columns(2)
    gpus = number(ctx, "gpus", "di_gpus", 8, 4096, container=c3)
    accumulation = number(ctx, "accumulation", "di_accumulation", 8, 10_000, container=c8)
    inputs, setup = training_case(ctx, {"model": "di_model", "gpu": "di_gpu", "method": "di_method",
                                        "checkpointing": "di_checkpointing", "batch": "di_batch",
                                        "sequence": "di_sequence"}, gradient_accumulation=accumulation)
    model, gpu = inputs.model, inputs.card
    if positions_note(ctx, model, setup.sequence):
        return
    budget = Budget(gpu)
    traits = model.traits
    try:
        results = []
        for strategy in STRATEGIES:
            layout = strategy_layout(strategy, int(gpus), model.spec)
            memory = training_memory(model.summary, model.spec, setup, layout, traits) if layout else None
            fewest = fewest_gpus(model.summary, model.spec, budget, strategy, setup, traits)
            results.append((strategy, memory, fewest))
    except CalculatorError as error:
        show_error(ctx, error)
        return
    usable = [(s, m) for s, m, _ in results if m is not None]
    fig = component_chart(ctx, [label(ctx, s) for s, _ in usable], peak_parts([m for _, m in usable]), "")
    capacity_line(fig, budget.usable_bytes, ctx.t("common.usable_on", gpu=gpu.name))
    highest = max(m.total_bytes for _, m in usable)
    if highest > 4 * budget.usable_bytes:  # bars far above the GPU are cut: the table gives their size
        fig.update_yaxes(range=[0, 4 * budget.usable_bytes / GIB])
    show_chart(fig, key="di_chart")
    rows = []
    for strategy, memory, fewest in results:
        rows.append({
            ctx.t("distributed.col_strategy"): label(ctx, strategy),
            ctx.t("distributed.col_layout"): (f"{memory.data_parallel} × {memory.tensor_parallel} × "
                                              f"{memory.pipeline_parallel}") if memory else "—",
            ctx.t("training.column_peak"): format_bytes(memory.total_bytes, lang) if memory else "—",
            ctx.t("distributed.col_cpu"): format_bytes(memory.cpu_bytes, lang) if memory and memory.cpu_bytes else "—",
            ctx.t("training.column_fits"): MARKS[budget.readings(memory.total_bytes, memory.steady_bytes).verdict]
            if memory else "—",
            ctx.t("distributed.col_fewest"): fewest.gpus or (
                ctx.t("distributed.never_ddp") if strategy == "ddp"
                else ctx.t("distributed.never", limit=format_count(fewest.tried, lang))),
        })
    st.dataframe(rows, hide_index=True)
    # The fewest GPUs without offload, then offload's answer with the host memory it needs.
    pick = fewest_pick([fewest.to_json() for _, _, fewest in results])
    offload = next(fewest for s, _, fewest in results if s == "zero3-offload")
    if pick["gpus"]:
        st.success(ctx.t("distributed.fewest", gpus=pick["gpus"], strategy=label(ctx, pick["strategy"]), gpu=gpu.name))
    else:
        st.error(ctx.t("distributed.none", gpu=gpu.name))
    if pick["offload_gpus"]:
        st.info(ctx.t("distributed.offload", gpus=offload.gpus, cpu=format_bytes(offload.memory.cpu_bytes, lang)))
    st.caption(ctx.t("distributed.caption", gpus=gpus))
    st.caption(ctx.t("distributed.accumulation", micro=setup.micro_batch, accumulation=setup.gradient_accumulation,
                     sequences=format_count(setup.sequences_per_step, lang),
                     sequence=format_count(setup.sequence, lang)))
    answer_with(ctx, paste_answer(inputs, setup))


def paste_answer(inputs, setup):
    """`train --gpu`'s answer: one GPU's step, and the fewest of these GPUs by strategy."""
    from calculator.answers.verdicts import largest_micro_batch_answer

    answer = largest_micro_batch_answer(inputs.model, inputs.card, setup)
    return train_answer(inputs, setup, answer, extra=("--accumulation", str(setup.gradient_accumulation)))


WIDGET = Widget(
    name="distributed",
    render=render,
    params=(Param("di_model", "Qwen/Qwen2.5-7B", "choice"), gpu_param("di_gpu", "NVIDIA A100 40GB SXM"),
            Param("di_gpus", "16", "int"), Param("di_method", "qlora", "choice"), Param("di_checkpointing", "none", "choice"),
            Param("di_batch", "2", "int"), Param("di_sequence", "8192", "int"), Param("di_accumulation", "2", "int")),
)
