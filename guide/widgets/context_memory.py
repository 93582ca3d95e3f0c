"""oom#context-length: memory against context length for one model, GPU, batch and precision,
with the GPU's capacity and the largest context that fits."""

from __future__ import annotations

import streamlit as st

from calculator.core.budget import Budget, readings_of
from calculator.memory.inference import inference_memory
from calculator.answers.verdicts import largest_context_answer
from guide.charts import Drawing, base_layout, capacity_line, mark_line, show_chart
from calculator.core.units import GIB
from guide.format import format_bytes, format_count
from guide.widgets import Context, Param, Widget, answer_with, gpu_param
from guide.inputs.common import case_inputs, readings_row
from guide.inputs.inference import attention_picker, inference_answer, kv_dtype_picker, mode_picker, moment
from guide.inputs.workload import length_unit, work_of, workload_note
from calculator.memory.workloads import length_of, lengths_at, varies

POINTS = 60
COLORS = ("#5b7db1", "#9ecae1", "#ff9f40")  # weights, cache, activations; the capacity line is red


def shown_span(span: int, largest: int) -> int:
    """How far the chart goes: far enough past the largest context that fits to show the
    curve crossing the capacity, never past the model's own window."""
    return min(span, max(4 * largest, 4096))


def context_points(shown: int, marked: int) -> list[int]:
    """Evenly spaced lengths up to `shown`, with the marked length itself."""
    step = max(shown // POINTS, 1)
    points = set(range(step, shown + 1, step)) | {1, shown}
    if 0 < marked <= shown:
        points.add(marked)
    return sorted(points)


def answer_for(inputs, attention: str = "sdpa", mode: str | None = None, kv_dtype: str | None = None):
    """The page's request to the engine (pure: the parity test calls it without Streamlit), in
    the case's workload: a forward pass's sequence, a seq2seq encoder's input, one window or
    image for speech and vision."""
    return largest_context_answer(inputs.model, inputs.card, inputs.batch, work=work_of(inputs), dtype=inputs.dtype,
                                  kv_dtype=kv_dtype, attention=attention, mode=mode)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "cm_model", "gpu": "cm_gpu", "dtype": "cm_dtype", "batch": "cm_batch"})
    model, gpu, dtype, batch = inputs.model, inputs.card, inputs.dtype, inputs.batch
    c5, c6, c7 = st.columns(3)
    attention = attention_picker(ctx, "cm_attention", container=c5)
    work = work_of(inputs)
    # the workload fixes the mode of every run but a generation's (workloads.lengths_at)
    mode = mode_picker(ctx, "cm_mode", model.spec, container=c6) if work.workload == "generation" else None
    kv_dtype = kv_dtype_picker(ctx, "cm_kv", container=c7)
    spec, summary = model.spec, model.summary
    workload_note(ctx, work)
    options = {"dtype": dtype, "kv_dtype": kv_dtype, "attention": attention, "mode": mode}
    capacity = Budget(gpu)
    answer = answer_for(inputs, attention, mode, kv_dtype)
    if not varies(work):
        _fixed(ctx, work, answer, inputs, options)
        return
    if work.workload != "generation":  # the workload's own lengths and mode (workloads.lengths_at)
        options = {k: v for k, v in options.items() if k != "mode"}
    largest, span = answer.figures["largest_context"], answer.figures["span"]
    shown = shown_span(span, largest)
    points = context_points(shown, largest)
    memories = [inference_memory(summary, spec, batch, **_lengths(work, t), **options) for t in points]
    fig = Drawing()
    parts = (("oom.weights", "weights_bytes"), ("oom.kv_cache", "kv_cache_bytes"),
             ("oom.activations", "activation_peak_bytes"))
    for (label, field), color in zip(parts, COLORS):
        fig.add_scatter(x=points, y=[getattr(m, field) / GIB for m in memories], name=ctx.t(label),
                        stackgroup="memory", mode="lines", line=dict(color=color))
    fig.update_layout(legend_traceorder="normal")
    capacity_line(fig, capacity.usable_bytes, ctx.t("common.usable_on", gpu=gpu.name))
    if 0 < largest < span:
        mark_line(fig, largest, ctx.t("context_memory.largest_mark", tokens=format_count(largest, lang)))
    x_axis = ctx.t("workload_memory.encoder_axis" if work.workload == "seq2seq" else "context_memory.x_axis")
    base_layout(fig, x_axis, ctx.t("common.memory_axis"), lang)
    show_chart(fig, key="cm_chart")
    if shown < span:
        st.caption(ctx.t("context_memory.shown", shown=format_count(shown, lang), span=format_count(span, lang)))
    _verdict(ctx, model, gpu, batch, answer, span, memories[0], options, capacity, work)
    if answer.figures["largest_context"] and work.workload == "generation":  # --context: a generation's tokens
        answer_with(ctx, inference_answer(model, gpu, batch, answer.figures["largest_context"], options))


def _lengths(work, length: int) -> dict:
    """inference_memory's lengths at `length` for the workload (a generation's: all prompt)."""
    return {"context": length} if work.workload == "generation" else lengths_at(work, length)


def _fixed(ctx: Context, work, answer, inputs, options: dict) -> None:
    """Speech and vision: one length for every item; the peak at the case's batch."""
    lang = ctx.lang
    options = {k: v for k, v in options.items() if k != "mode"}
    memory = inference_memory(inputs.model.summary, inputs.model.spec, inputs.batch, **lengths_at(work, 0), **options)
    readings_row(ctx, readings_of(memory, Budget(inputs.card)), inputs.card)
    st.markdown(ctx.t("workload_memory.fixed_context", length=format_count(length_of(work), lang),
                      unit=length_unit(ctx, work), batch=inputs.batch, total=format_bytes(memory.total_bytes, lang),
                      verdict=ctx.t(f"workload_memory.verdict_{answer.verdict}")))


def _verdict(ctx: Context, model, gpu, batch: int, answer, span: int, shortest, options: dict, budget, work) -> None:
    lang = ctx.lang
    largest = answer.figures["largest_context"]
    if not largest:
        st.error(ctx.t("context_memory.none_fits", batch=batch, gpu=gpu.name,
                       weights=format_bytes(shortest.weights_bytes, lang),
                       capacity=format_bytes(budget.usable_bytes, lang)))
        return
    at_edge = inference_memory(model.summary, model.spec, batch, **_lengths(work, largest), **options)
    readings_row(ctx, readings_of(at_edge, budget), gpu)
    beyond = answer.figures["largest_context_tight"]
    if beyond > largest:
        st.caption(ctx.t("context_memory.tight", tokens=format_count(beyond, lang)))
    if largest >= span:
        st.success(ctx.t("context_memory.all_fit", batch=batch, tokens=format_count(span, lang), gpu=gpu.name,
                         total=format_bytes(at_edge.total_bytes, lang)))
    else:
        st.warning(ctx.t("context_memory.largest", batch=batch, tokens=format_count(largest, lang), gpu=gpu.name,
                         span=format_count(span, lang)))
    if work.workload == "generation":  # the others read their own lengths (workload_note)
        st.caption(ctx.t("context_memory.all_prompt"))
    if at_edge.attention_used == "flash":
        st.info(ctx.t("oom.runs_kernel", kernel=at_edge.attn_implementation))
    elif at_edge.attention_used != at_edge.attention:
        st.info(ctx.t("oom.runs_eager"))
    st.markdown(ctx.t(
        "context_memory.breakdown", tokens=format_count(largest, lang), weights=format_bytes(at_edge.weights_bytes, lang),
        kv=format_bytes(at_edge.kv_cache_bytes, lang), activations=format_bytes(at_edge.activation_peak_bytes, lang),
        moment=moment(ctx, at_edge.peak_moment)))


WIDGET = Widget(
    name="context-memory",
    render=render,
    params=(Param("cm_model", "mistralai/Mistral-7B-v0.1", "choice"), gpu_param("cm_gpu", "NVIDIA A100 80GB SXM"),
            Param("cm_dtype", "int4", "choice"), Param("cm_batch", "16", "int"), Param("cm_attention", "eager", "choice"),
            Param("cm_mode", "loglikelihood", "choice"), Param("cm_kv", "float8", "choice")),
)
