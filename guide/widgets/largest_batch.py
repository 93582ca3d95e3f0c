"""oom#batch-size: the largest batch for the longest sample, against the batch an automatic
search picks when it probes with typical samples."""

from __future__ import annotations

import streamlit as st

from calculator.core.budget import Budget, readings_of
from calculator.memory.inference import inference_memory
from calculator.answers.verdicts import largest_batch_answer
from guide.charts import Drawing, base_layout, show_chart
from guide.format import format_bytes, format_count
from guide.widgets import Context, Param, Widget, answer_with, gpu_param
from guide.inputs.common import case_inputs, tokens_input
from guide.inputs.inference import inference_answer, mode_picker
from guide.inputs.workload import length_unit, work_of, workload_note
from calculator.memory.workloads import length_of, lengths_at, varies



def lengths_between(typical: int, longest: int) -> list[int]:
    """The typical length, doublings of it, and the longest length."""
    low, high = sorted((typical, longest))
    lengths, t = [low], low * 2
    while t < high and len(lengths) < 10:
        lengths.append(t)
        t *= 2
    return sorted(set(lengths + [high]))


def _lengths(work, length: int) -> dict:
    """inference_memory's lengths at `length`: a generation's all prompt, else the workload's."""
    return {"context": length} if work.workload == "generation" else lengths_at(work, length)


def answer_for(inputs, work, length: int, mode: str | None = None):
    """The page's request to the engine (pure): the largest batch of items of `length` in the
    case's workload (a generation's context all prompt, in `mode`)."""
    options = {"mode": mode} if work.workload == "generation" else {}
    return largest_batch_answer(inputs.model, inputs.card, _lengths(work, length), dtype=inputs.dtype, **options)


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "lb_model", "gpu": "lb_gpu", "dtype": "lb_dtype"})
    model, gpu, dtype = inputs.model, inputs.card, inputs.dtype
    work = work_of(inputs)
    workload_note(ctx, work)
    if not varies(work):
        largest = answer_for(inputs, work, 0).figures["largest_batch"]
        st.markdown(ctx.t("workload_memory.fixed_batch", length=format_count(length_of(work), lang),
                          unit=length_unit(ctx, work), batch=format_count(largest, lang), gpu=gpu.name))
        return
    window = model.spec.max_positions or 1_048_576
    c4, c5, c6 = st.columns(3)
    longest = min(tokens_input(ctx, "largest_batch.longest", "lb_longest", min(8192, window), container=c4), window)
    typical = min(tokens_input(ctx, "largest_batch.typical", "lb_typical", min(512, window), container=c5), window)
    mode = mode_picker(ctx, "lb_mode", model.spec, container=c6) if work.workload == "generation" else None
    options = {"dtype": dtype, "mode": mode} if work.workload == "generation" else {"dtype": dtype}
    capacity = Budget(gpu)
    lengths = lengths_between(typical, longest)
    batches = [answer_for(inputs, work, t, mode).figures["largest_batch"] for t in lengths]
    at_longest, at_typical = batches[lengths.index(longest)], batches[lengths.index(typical)]
    m1, m2 = st.columns(2)
    m1.metric(ctx.t("largest_batch.metric_longest", tokens=format_count(longest, lang)), format_count(at_longest, lang))
    m2.metric(ctx.t("largest_batch.metric_typical", tokens=format_count(typical, lang)), format_count(at_typical, lang))
    fig = Drawing().add_bar(x=[format_count(t, lang) for t in lengths], y=batches, marker_color="#3366cc",
                            text=[format_count(b, lang) for b in batches], textposition="outside")
    fig.update_xaxes(type="category")
    base_layout(fig, ctx.t("largest_batch.x_axis"), ctx.t("largest_batch.y_axis"), lang, height=320)
    show_chart(fig, key="lb_chart")
    if at_longest and work.workload == "generation":  # the command's --context reads a generation's tokens
        answer_with(ctx, inference_answer(model, gpu, at_longest, longest, options))
    if not at_longest:
        st.error(ctx.t("largest_batch.none_fits", tokens=format_count(longest, lang), gpu=gpu.name))
    elif typical < longest and at_typical > at_longest:
        needed = readings_of(inference_memory(model.summary, model.spec, at_typical, **_lengths(work, longest),
                                              **options), capacity).reserved_bytes
        st.warning(ctx.t("largest_batch.trap", found=format_count(at_typical, lang), typical=format_count(typical, lang),
                         longest=format_count(longest, lang), needed=format_bytes(needed, lang),
                         capacity=format_bytes(capacity.usable_bytes, lang), gpu=gpu.name,
                         safe=format_count(at_longest, lang)))
    else:
        st.success(ctx.t("largest_batch.safe", batch=format_count(at_longest, lang), tokens=format_count(longest, lang),
                         gpu=gpu.name))


WIDGET = Widget(
    name="largest-batch",
    render=render,
    params=(Param("lb_model", "mistralai/Mistral-7B-v0.1", "choice"), gpu_param("lb_gpu", "NVIDIA L4"), Param("lb_dtype", "int8", "choice"),
            Param("lb_longest", "16384", "int"), Param("lb_typical", "256", "int"), Param("lb_mode", "loglikelihood", "choice")),
)
