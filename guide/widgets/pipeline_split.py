"""parallelism#pipeline-parallelism: the real model's layers split over k GPUs, balanced by
bytes, with each GPU's memory against its capacity."""

from __future__ import annotations

import streamlit as st

from calculator.distributed.parallel import MAX_STAGES, tied_head_copy_bytes
from calculator.memory.quantization import storage_dtype
from calculator.answers.verdicts import pipeline_answer
from guide.charts import capacity_line, show_chart, stacked_memory
from guide.format import format_bytes
from guide.widgets import Context, Param, Widget, answer_with, gpu_param
from guide.inputs.common import case_inputs, tokens_input

KINDS = ("embedding", "layers", "head", "other")
MARKS = {"fits": "✓", "tight": "≈", "too_big": "✗"}


def answer_for(inputs, gpus: int):
    """The page's request to the engine (pure: the parity test calls it without Streamlit)."""
    return pipeline_answer(inputs.model, inputs.card, storage_dtype(inputs.dtype), gpus)


def paste_answer(inputs, gpus: int, answer):
    """The pipeline command's answer for this split (its JSON, as `pipeline --json` writes it)."""
    from calculator.answers.markdown import answer_for as answer_of
    from calculator.answers.parallel_json import pipeline_json

    typed, dtype = inputs.model.key or inputs.model.name, storage_dtype(inputs.dtype)
    argv = (typed, "--gpus", str(gpus), "--gpu", inputs.card.key, "--dtype", dtype)
    return answer_of("pipeline", pipeline_json(inputs.model, inputs.card, dtype, gpus, answer), argv, typed)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "pp_model", "gpu": "pp_gpu", "dtype": "pp_dtype"})
    model, gpu, dtype = inputs.model, inputs.card, storage_dtype(inputs.dtype)
    units = len(model.summary.units)
    gpus = tokens_input(ctx, "parallelism.gpus", "pp_gpus", 4, high=MAX_STAGES, step=1)
    if gpus > units:
        st.warning(ctx.t("parallelism.too_many_stages", gpus=gpus, units=units))
        gpus = units
    answer = answer_for(inputs, gpus)
    stages, usable = answer.detail, answer.figures["usable_bytes"]
    answer_with(ctx, paste_answer(inputs, gpus, answer))
    labels = [ctx.t("parallelism.gpu_label", n=s.gpu) for s in stages]
    parts = {ctx.t(f"parallelism.kind_{kind}"): [s.kinds.get(kind, 0) for s in stages] for kind in KINDS}
    parts = {name: values for name, values in parts.items() if any(values)}
    fig = stacked_memory(labels, parts, ctx.t("parallelism.gpu_axis"), ctx.t("common.memory_axis"), lang)
    capacity_line(fig, usable, ctx.t("common.usable_on", gpu=gpu.name))
    show_chart(fig, key="pp_chart")
    st.dataframe([{
        ctx.t("parallelism.col_gpu"): label,
        ctx.t("parallelism.col_from"): s.first,
        ctx.t("parallelism.col_to"): s.last,
        ctx.t("parallelism.col_units"): s.units,
        ctx.t("parallelism.col_bytes"): format_bytes(s.bytes, lang),
        ctx.t("parallelism.col_fits"): MARKS[verdict],
    } for label, s, verdict in zip(labels, stages, answer.figures["per_gpu_verdicts"])], hide_index=True)
    largest = max(stages, key=lambda s: s.bytes)
    total = model.summary.total_bytes_at(dtype)
    message = ctx.t("parallelism.split_summary", total=format_bytes(total, lang), gpus=gpus,
                    largest=format_bytes(largest.bytes, lang), gpu=largest.gpu,
                    even=format_bytes(total // gpus, lang))
    {"fits": st.success, "tight": st.warning, "too_big": st.error}[answer.verdict](message)
    st.caption(ctx.t("parallelism.weights_only", usable=format_bytes(usable, lang), gpu=gpu.name))
    copy = tied_head_copy_bytes(model.summary, model.spec, dtype)
    if copy and gpus > 1:
        st.caption(ctx.t("parallelism.tied_note", bytes=format_bytes(copy, lang)))


WIDGET = Widget(
    name="pipeline-split",
    render=render,
    params=(Param("pp_model", "meta-llama/Meta-Llama-3-8B", "choice"), gpu_param("pp_gpu", "NVIDIA GeForce RTX 4090"),
            Param("pp_dtype", "float32", "choice"), Param("pp_gpus", "3", "int")),
)
