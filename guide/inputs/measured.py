"""Two pieces the speed calculators share (not a widget of its own): how long the case's
items take at the case's batch, and a speed the reader measured against the ceiling, in the
workload's unit, with the section to read next (calculator/memory/workload_speed.py decides both)."""

from __future__ import annotations

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.memory.workload_speed import WorkloadSpeed, against_ceiling
from guide.format import format_number, format_percent
from guide.widgets import Context


def duration(seconds: float, ctx: Context) -> str:
    """Seconds, minutes, hours or days, whichever reads best."""
    for limit, unit, size in ((120, "seconds", 1), (7200, "minutes", 60), (172_800, "hours", 3600)):
        if seconds < limit:
            return ctx.t(f"common.{unit}", n=format_number(seconds / size, 1, ctx.lang))
    return ctx.t("measured.days", n=format_number(seconds / 86_400, 1, ctx.lang))


def job_time(ctx: Context, speed: WorkloadSpeed, items: int) -> None:
    """How long the job's items take at the case's batch, in the workload's words."""
    lang = ctx.lang
    params = dict(items=format_number(items, 0, lang), batch=speed.batch, time=duration(speed.seconds_for(items), ctx),
                  rate=format_number(speed.ceiling, 1, lang))
    if speed.workload == "speech":
        params["hours"] = format_number(speed.audio_hours_per_hour, 0, lang)
    st.markdown(ctx.t(f"measured.job_{speed.workload}", **params))


def measured_box(ctx: Context, speed: WorkloadSpeed, key: str) -> None:
    """The reader types the speed they measure at the case's batch; the page says what share
    of the ceiling it is and where to read next. Empty (0) says nothing."""
    unit = ctx.t(f"measured.unit_{speed.unit}")
    measured = st.number_input(ctx.t("measured.label", unit=unit), min_value=0.0, max_value=1e12, value=0.0,
                               step=1.0, key=key, bind="query-params", help=ctx.t("measured.help", batch=speed.batch))
    if not measured:
        return
    try:
        answer = against_ceiling(measured, speed)
    except CalculatorError:
        return  # the input's own bounds keep out what the engine refuses
    st.info(ctx.t(f"measured.{answer.verdict}", share=format_percent(answer.fraction, ctx.lang, 0),
                  ceiling=format_number(answer.ceiling, 1, ctx.lang), unit=unit), icon=":material/speed:")
