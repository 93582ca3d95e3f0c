"""oom#sort-by-length: for a length distribution the reader sets, when the first out-of-memory
comes in each order (dataset order, shortest first, longest first)."""

from __future__ import annotations

import streamlit as st

from calculator.core.budget import Budget
from calculator.memory.inference import largest_context
from calculator.memory.length_order import MAX_SAMPLES, simulate_sampled
from calculator.answers.verdicts import largest_context_answer
from calculator.memory.workloads import length_of, varies
from guide.charts import Drawing, base_layout, level_line, show_chart
from guide.format import format_count
from guide.widgets import Context, Param, Widget, gpu_param
from guide.inputs.common import case_inputs, tokens_input
from guide.widgets.data_parallel import duration
from guide.inputs.workload import length_unit, work_of, workload_note

COLORS = {"shuffled": "#9467bd", "shortest_first": "#ff7f0e", "longest_first": "#2ca02c"}
SHOWN_POINTS = 400  # per order: a long run is drawn from the longest batch of each stretch


def thinned(padded: tuple[int, ...], ends: tuple[float, ...], stop: int) -> tuple[list[float], list[int]]:
    """At most SHOWN_POINTS points of the first `stop` batches, keeping each stretch's longest."""
    step = max(1, -(-stop // SHOWN_POINTS))
    xs, ys = [], []
    for i in range(0, stop, step):
        j = max(range(i, min(i + step, stop)), key=lambda k: padded[k])
        xs.append(ends[j] / 3600)
        ys.append(padded[j])
    return xs, ys


def answer_for(inputs, work, longest: int) -> int:
    """The longest item that fits at the case's batch (pure): a generation's context all
    prompt, searched up to `longest`; another workload's own length (a forward pass's
    sequence, a seq2seq encoder's input) through the engine's answer."""
    if work.workload == "generation":
        return largest_context(inputs.model.summary, inputs.model.spec, Budget(inputs.card), inputs.batch,
                               limit=max(longest, 1), dtype=inputs.dtype)
    answer = largest_context_answer(inputs.model, inputs.card, inputs.batch, work=work, dtype=inputs.dtype)
    return answer.figures["largest_context"]


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"model": "sl_model", "gpu": "sl_gpu", "dtype": "sl_dtype", "batch": "sl_batch"})
    model, gpu, dtype, batch = inputs.model, inputs.card, inputs.dtype, inputs.batch
    work = work_of(inputs)
    workload_note(ctx, work)
    if not varies(work):  # one window, one image: every batch peaks the same
        st.info(ctx.t("workload_memory.fixed_sorting", length=format_count(length_of(work), lang),
                      unit=length_unit(ctx, work)))
        return
    c5, c6, c7 = st.columns(3)
    median = tokens_input(ctx, "sort_by_length.median", "sl_median", 400, high=131_072, container=c5, step=50)
    longest = tokens_input(ctx, "sort_by_length.longest", "sl_longest", 6000, high=131_072, container=c6, step=500)
    count = tokens_input(ctx, "sort_by_length.samples", "sl_samples", 50_000, high=MAX_SAMPLES, container=c7, step=1000)
    if median > longest:
        st.info(ctx.t("sort_by_length.median_above_longest"))
    limit = answer_for(inputs, work, longest)
    runs = simulate_sampled(model.summary, model.spec, gpu, dtype, batch, count, median, longest, limit)
    fig = Drawing()
    rows = []
    for run in runs:
        name = ctx.t(f"sort_by_length.order_{run.order}")
        stop = run.first_oom + 1 if run.first_oom is not None else len(run.padded)
        xs, ys = thinned(run.padded, run.ends, stop)
        fig.add_scatter(x=xs, y=ys, name=name, mode="lines", line=dict(color=COLORS[run.order], width=1))
        if run.first_oom is not None:
            fig.add_scatter(x=[run.seconds_before_oom / 3600], y=[run.padded[run.first_oom]], mode="markers",
                            marker=dict(symbol="x", size=14, color=COLORS[run.order]), showlegend=False,
                            name=ctx.t("sort_by_length.oom_marker"))
        rows.append(_row(ctx, run, name, batch, min(count, MAX_SAMPLES)))
    if limit:
        level_line(fig, limit, ctx.t("sort_by_length.limit_line", tokens=format_count(limit, lang)))
    base_layout(fig, ctx.t("sort_by_length.x_axis"), ctx.t("sort_by_length.y_axis"), lang)
    show_chart(fig, key="sl_chart")
    st.dataframe(rows, hide_index=True)
    _verdict(ctx, runs, limit, batch, longest, gpu.name)


def _row(ctx: Context, run, name: str, batch: int, samples: int) -> dict:
    lang = ctx.lang
    if run.first_oom is None:
        when, after, done = ctx.t("sort_by_length.never"), duration(run.total_seconds, ctx), format_count(samples, lang)
    else:
        when = ctx.t("sort_by_length.batch_of", batch=format_count(run.first_oom + 1, lang),
                     batches=format_count(len(run.padded), lang))
        after, done = duration(run.seconds_before_oom, ctx), format_count(min(run.first_oom * batch, samples), lang)
    return {ctx.t("sort_by_length.col_order"): name, ctx.t("sort_by_length.col_first_oom"): when,
            ctx.t("sort_by_length.col_after"): after, ctx.t("sort_by_length.col_done"): done}


def _verdict(ctx: Context, runs, limit: int, batch: int, longest: int, gpu: str) -> None:
    lang = ctx.lang
    if not limit:
        st.error(ctx.t("sort_by_length.nothing_fits", batch=batch, gpu=gpu))
        return
    shuffled = next(r for r in runs if r.order == "shuffled")
    if shuffled.first_oom is None:
        st.success(ctx.t("sort_by_length.all_fit", longest=format_count(longest, lang), limit=format_count(limit, lang)))
        return
    st.warning(ctx.t("sort_by_length.verdict", after=duration(shuffled.seconds_before_oom, ctx),
                     limit=format_count(limit, lang), batch=batch))


WIDGET = Widget(
    name="sort-by-length",
    render=render,
    params=(Param("sl_model", "mistralai/Mistral-7B-v0.1", "choice"), gpu_param("sl_gpu", "NVIDIA A100 80GB SXM"),
            Param("sl_dtype", "int4", "choice"), Param("sl_batch", "32", "int"), Param("sl_median", "800", "int"),
            Param("sl_longest", "12000", "int"), Param("sl_samples", "20000", "int")),
)
