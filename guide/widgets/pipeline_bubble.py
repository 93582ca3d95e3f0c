"""parallelism#pipeline-bubble: the idle share (p - 1) / (m + p - 1), and the schedule it
comes from, drawn from a simulation of the stages (GPipe or 1F1B)."""

from __future__ import annotations

import streamlit as st

from calculator.distributed.parallel import (SCHEDULES, bubble_fraction, peak_in_flight, pipeline_schedule,
                                 schedule_idle_fraction)
from guide.charts import Drawing, base_layout, show_chart
from guide.format import format_number, format_percent
from guide.widgets import Context, Param, Widget
from guide.inputs.common import tokens_input

PALETTE = ["#3366cc", "#dc3912", "#ff9900", "#109618", "#990099", "#0099c6", "#dd4477", "#66aa00"]


def timeline(slots, stages: int, ctx: Context) -> Drawing:
    """One row per stage, one box per forward (solid) or backward (hatched) of a micro-batch."""
    fig = Drawing()
    for phase in ("F", "B"):
        chosen = [s for s in slots if s.phase == phase]
        fig.add_bar(
            y=[ctx.t("parallelism.stage_label", n=s.stage) for s in chosen],
            x=[s.end - s.start for s in chosen], base=[s.start for s in chosen], orientation="h",
            marker_color=[PALETTE[s.micro_batch % len(PALETTE)] for s in chosen],
            marker_pattern_shape="/" if phase == "B" else "", marker_line_color="white", marker_line_width=1,
            text=[str(s.micro_batch + 1) for s in chosen], textposition="inside", insidetextanchor="middle",
            textfont_color="white" if phase == "F" else "#222",
            name=ctx.t(f"parallelism.phase_{phase}"),
            hovertemplate=ctx.t(f"parallelism.phase_{phase}") + " %{text}<extra></extra>",
        )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_layout(barmode="overlay", bargap=0.25)
    base_layout(fig, ctx.t("parallelism.time_axis"), "", ctx.lang, height=90 + 40 * stages)
    fig.update_layout(hovermode="closest")
    return fig


def render(ctx: Context) -> None:
    lang = ctx.lang
    c1, c2 = st.columns([1, 1])
    stages = tokens_input(ctx, "parallelism.stages", "pb_stages", 4, low=2, high=16, container=c1, step=1)
    schedule = c2.radio(ctx.t("parallelism.schedule"), list(SCHEDULES), key="pb_schedule", horizontal=True,
                        bind="query-params", help=ctx.t("parallelism.schedule_help"))
    micro = st.slider(ctx.t("parallelism.micro_batches"), 1, 32, 4, key="pb_micro", bind="query-params")
    slots = pipeline_schedule(stages, micro, schedule)
    formula = bubble_fraction(stages, micro)
    measured = schedule_idle_fraction(slots, stages)
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("parallelism.bubble"), format_percent(formula, lang))
    m2.metric(ctx.t("parallelism.measured"), format_percent(measured, lang))
    m3.metric(ctx.t("parallelism.in_flight"), peak_in_flight(slots, 0))
    show_chart(timeline(slots, stages, ctx), key="pb_timeline")
    counts = list(range(1, 65))
    curve = Drawing().add_scatter(x=counts, y=[100 * bubble_fraction(stages, m) for m in counts], mode="lines",
                                  name=ctx.t("parallelism.bubble"))
    curve.add_scatter(x=[micro], y=[100 * formula], mode="markers", marker_size=11, name=ctx.t("parallelism.you"))
    base_layout(curve, ctx.t("parallelism.micro_batches"), ctx.t("parallelism.bubble_axis"), lang, height=280)
    show_chart(curve, key="pb_curve")
    st.caption(ctx.t("parallelism.bubble_caption", p=stages, m=micro,
                     fraction=format_number(100 * formula, 1, lang), needed=4 * stages))


WIDGET = Widget(
    name="pipeline-bubble",
    render=render,
    params=(Param("pb_stages", "8", "int"), Param("pb_micro", "16", "int"), Param("pb_schedule", "1F1B", "choice")),
)
