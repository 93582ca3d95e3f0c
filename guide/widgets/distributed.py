"""fine-tuning#distributed: data parallelism, ZeRO, tensor and pipeline parallelism and CPU
offload side by side on N GPUs for the reader's model, and the fewest GPUs each needs."""

from __future__ import annotations

import streamlit as st

from calculator.errors import CalculatorError
from calculator.training import STRATEGIES, TrainingSetup, fewest_gpus, strategy_layout, training_memory
from guide.charts import GIB, capacity_line
from guide.format import format_bytes, format_count
from guide.widgets import Context, Param, Widget, share_box
from guide.widgets.common import gpu_picker, model_picker
from guide.widgets.training_inputs import checkpointing_picker, component_chart, method_picker, number, peak_parts, \
    show_error

KEYS = ("di_model", "di_gpu", "di_gpus", "di_method", "di_checkpointing", "di_batch", "di_sequence", "di_accumulation")
# Names of the strategies: technical terms, the same in both languages, except the word
# for offloading (distributed.label_offload).
LABELS = {"ddp": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3",
          "tensor": "TP", "pipeline": "PP", "tensor-pipeline": "TP × PP"}


def label(ctx: Context, strategy: str) -> str:
    return ctx.t("distributed.label_offload") if strategy == "zero3-offload" else LABELS[strategy]


def render(ctx: Context) -> None:
    lang = ctx.lang
    c1, c2, c3 = st.columns([2, 2, 1])
    model = model_picker(ctx, "di_model", default="llama-3.1-70b", container=c1)
    gpu = gpu_picker(ctx, "di_gpu", default="h100", container=c2)
    gpus = number(ctx, "gpus", "di_gpus", 8, 4096, container=c3)
    c4, c5, c6, c7, c8 = st.columns(5)
    method = method_picker(ctx, "di_method", container=c4)
    checkpointing = checkpointing_picker(ctx, "di_checkpointing", default="full", container=c5)
    batch = number(ctx, "micro_batch", "di_batch", 1, 4096, container=c6)
    sequence = number(ctx, "sequence", "di_sequence", 4096, 1_048_576, container=c7, step=256)
    accumulation = number(ctx, "accumulation", "di_accumulation", 8, 10_000, container=c8)
    traits = model.traits
    setup = TrainingSetup(method=method, checkpointing=checkpointing, micro_batch=batch, sequence=sequence,
                          gradient_accumulation=accumulation)
    try:
        results = []
        for strategy in STRATEGIES:
            layout = strategy_layout(strategy, int(gpus), model.spec)
            memory = training_memory(model.summary, model.spec, setup, layout, traits) if layout else None
            fewest = fewest_gpus(model.summary, model.spec, gpu.memory_bytes, strategy, setup, traits)
            results.append((strategy, memory, fewest))
    except CalculatorError as error:
        show_error(ctx, error)
        share_box(ctx, KEYS)
        return
    usable = [(s, m) for s, m, _ in results if m is not None]
    fig = component_chart(ctx, [label(ctx, s) for s, _ in usable], peak_parts([m for _, m in usable]), "")
    capacity_line(fig, gpu.memory_bytes, ctx.t("common.capacity_of", gpu=gpu.name))
    highest = max(m.total_bytes for _, m in usable)
    if highest > 4 * gpu.memory_bytes:  # bars far above the GPU are cut: the table gives their size
        fig.update_yaxes(range=[0, 4 * gpu.memory_bytes / GIB])
    st.plotly_chart(fig, config={"displayModeBar": False}, key="di_chart")
    rows = []
    for strategy, memory, fewest in results:
        rows.append({
            ctx.t("distributed.col_strategy"): label(ctx, strategy),
            ctx.t("distributed.col_layout"): (f"{memory.data_parallel} × {memory.tensor_parallel} × "
                                              f"{memory.pipeline_parallel}") if memory else "—",
            ctx.t("training.column_peak"): format_bytes(memory.total_bytes, lang) if memory else "—",
            ctx.t("distributed.col_cpu"): format_bytes(memory.cpu_bytes, lang) if memory and memory.cpu_bytes else "—",
            ctx.t("training.column_fits"): ("✓" if memory.total_bytes <= gpu.memory_bytes else "✗") if memory else "—",
            ctx.t("distributed.col_fewest"): fewest.gpus or (
                ctx.t("distributed.never_ddp") if strategy == "ddp"
                else ctx.t("distributed.never", limit=format_count(fewest.tried, lang))),
        })
    st.dataframe(rows, hide_index=True)
    # The fewest GPUs without offload, then offload's answer with the host memory it needs.
    fitting = [(fewest.gpus, STRATEGIES.index(s), s) for s, _, fewest in results
               if fewest.gpus and s != "zero3-offload"]
    offload = next(fewest for s, _, fewest in results if s == "zero3-offload")
    if fitting:
        count, _, strategy = min(fitting)
        st.success(ctx.t("distributed.fewest", gpus=count, strategy=label(ctx, strategy), gpu=gpu.name))
    else:
        st.error(ctx.t("distributed.none", gpu=gpu.name))
    if offload.gpus and (not fitting or offload.gpus < min(fitting)[0]):
        st.info(ctx.t("distributed.offload", gpus=offload.gpus, cpu=format_bytes(offload.memory.cpu_bytes, lang)))
    st.caption(ctx.t("distributed.caption", gpus=gpus))
    share_box(ctx, KEYS)


WIDGET = Widget(
    name="distributed",
    render=render,
    params=(Param("di_model", "meta-llama/Llama-3.1-8B"), Param("di_gpu", "NVIDIA A100 40GB SXM"),
            Param("di_gpus", "16"), Param("di_method", "qlora"), Param("di_checkpointing", "none"),
            Param("di_batch", "4"), Param("di_sequence", "8192"), Param("di_accumulation", "2")),
)
