"""oom#oom-message: paste a CUDA out-of-memory message, get its figures and the likely cause.

The pasted text is user input: it is only ever read by the calculator's bounded patterns;
the page shows figures it formatted itself, never the text."""

from __future__ import annotations

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.memory.oom_case import case_lines, read_against_case
from calculator.memory.oom_message import Reading, read
from guide.charts import Drawing, base_layout, show_chart
from calculator.core.units import GIB
from guide.format import escape_markdown, format_bytes, format_count
from guide.widgets import Context, Param, Widget

MAX_INPUT = 6000  # a message is about 600 characters; the text also travels in the share link

EXAMPLE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of "
           "79.25 GiB of which 2.19 GiB is free. Including non-PyTorch memory, this process has 77.05 GiB memory in "
           "use. Of the allocated memory 51.20 GiB is allocated by PyTorch, and 25.17 GiB is reserved by PyTorch but "
           "unallocated. If reserved but unallocated memory is large try setting "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")


def render(ctx: Context) -> None:
    text = st.text_area(ctx.t("oom_message.label"), key="om_text", bind="query-params", max_chars=MAX_INPUT,
                        height=140, placeholder=ctx.t("oom_message.placeholder"), help=ctx.t("oom_message.help"))
    if not (text or "").strip():
        st.info(ctx.t("oom_message.empty"))
    else:
        reading = read(text)
        if reading.report is not None:
            _show(ctx, reading)
        elif reading.mentions_oom:
            st.warning(ctx.t("oom_message.no_figures"))
        else:
            st.error(ctx.t("oom_message.not_recognised"))


def _show(ctx: Context, reading: Reading) -> None:
    lang, r = ctx.lang, reading.report
    size = lambda n: format_bytes(n, lang)  # noqa: E731
    rows = [(ctx.t("oom_message.requested"), size(r.requested)), (ctx.t("oom_message.total"), size(r.total)),
            (ctx.t("oom_message.free"), size(r.free) if r.free is not None else "—"),
            (ctx.t("oom_message.allocated"), size(r.allocated)),
            (ctx.t("oom_message.unallocated"), size(r.reserved_unallocated))]
    if r.outside_pytorch is not None:
        rows.append((ctx.t("oom_message.outside"), size(r.outside_pytorch)))
    if r.own_process is not None:
        rows.append((ctx.t("oom_message.this_process"), size(r.own_process)))
        rows.append((ctx.t("oom_message.this_process_outside"), size(r.this_process_outside_pytorch)))
    if r.other_processes is not None:
        rows.append((ctx.t("oom_message.others"), size(r.other_processes)))
    if r.private_pools:
        rows.append((ctx.t("oom_message.pools"), size(r.private_pools)))
    st.markdown(ctx.t("oom_message.read_as", device=escape_markdown(r.device or "GPU", limit=20),
                      style=ctx.t(f"oom_message.style_{r.style}")))
    st.dataframe([{ctx.t("oom_message.col_what"): k, ctx.t("oom_message.col_size"): v} for k, v in rows],
                 hide_index=True)
    show_chart(_card_chart(ctx, reading), key="om_chart")
    for i, cause in enumerate(reading.causes):
        message = ctx.t(f"oom_message.cause_{cause.key}", **{k: size(v) for k, v in cause.params.items()})
        (st.warning if i == 0 else st.info)(message)
    _against_case(ctx, r)


def _against_case(ctx: Context, report) -> None:
    """What the allocated figure is made of in the page's case, and which of its tensors the
    request is (the case's context: prompt + new tokens)."""
    case = ctx.case
    if case is None or case.model.spec is None:
        return
    tokens = case.case.prompt + case.case.new_tokens  # what the oom chapter's case runs (its bar shows both)
    try:
        reading = read_against_case(report, case.model.summary, case.model.spec, case.case.batch, tokens, case.case.dtype)
    except CalculatorError:  # a case the inference calculator refuses (longer than the model's positions)
        return
    lines = case_lines(reading, ctx.lang)
    heading = ctx.t("oom_case.heading", model=escape_markdown(case.model.name, limit=80), dtype=case.case.dtype,
                    batch=format_count(case.case.batch, ctx.lang), tokens=format_count(tokens, ctx.lang))
    st.info("\n\n".join([heading, *lines]))  # the lines are our own sentences and figures


def _card_chart(ctx: Context, reading: Reading) -> Drawing:
    """The card as one bar: PyTorch's tensors, its unused reserve, what is outside it, free;
    and beside it, the request that failed."""
    r = reading.report
    parts = [("oom_message.allocated", r.allocated, "#3366cc"), ("oom_message.unallocated", r.reserved_unallocated, "#9ecae1"),
             ("oom_message.outside", r.outside_pytorch or 0, "#ff7f0e"), ("oom_message.free", r.free or 0, "#d9d9d9")]
    fig = Drawing()
    card = ctx.t("oom_message.bar_card")
    for key, value, color in parts:
        fig.add_bar(y=[card], x=[value / GIB], name=ctx.t(key), orientation="h", marker_color=color)
    fig.add_bar(y=[ctx.t("oom_message.bar_request")], x=[r.requested / GIB], name=ctx.t("oom_message.requested"),
                orientation="h", marker_color="#d62728")
    fig.update_layout(barmode="stack", legend_traceorder="normal")
    return base_layout(fig, ctx.t("common.memory_axis"), "", ctx.lang, height=220)


WIDGET = Widget(name="oom-message", render=render, params=(Param("om_text", EXAMPLE, "text"),))
