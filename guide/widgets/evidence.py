"""The evidence box (serving#engine-settings, oom#find-memory, memory-estimate#units): paste a
vLLM or SGLang start-up log, nvidia-smi, accelerate estimate-memory, memory_summary() or an
out-of-memory message; read its figures, set them beside the page's case, say what to do.

The paste is user input: only the calculator's bounded patterns read it, and the page shows
figures it formatted itself; the one string taken from it (accelerate's model name) is escaped."""

from __future__ import annotations

import streamlit as st

from calculator.core.errors import CalculatorError
from calculator.answers.evidence import read
from calculator.answers.evidence_compare import Case, compare
from calculator.answers.answer import section_link
from calculator.answers.evidence_text import answer_markdown, figure_rows, kind_name, lines, read_command
from guide.answer_box import answer_text_box, guide_base
from guide.format import escape_markdown
from guide.widgets import Context, Param, Widget, show_error

MAX_INPUT = 12_000  # the box's text travels in the share link; the CLI reads up to 512 KiB

EXAMPLE = ("INFO 05-06 20:59:59 [gpu_model_runner.py:4879] Model loading took 14.99 GiB memory and 31.6 seconds\n"
           "INFO 05-06 21:00:30 [kv_cache_utils.py:1733] GPU KV cache size: 365,008 tokens\n"
           "INFO 05-06 21:00:30 [kv_cache_utils.py:1734] Maximum concurrency for 131,072 tokens per request: 2.78x")


def _quote(value: str) -> str:
    return escape_markdown(value, 120)


def render(ctx: Context) -> None:
    text = st.text_area(ctx.t("evidence.label"), key="ev_text", bind="query-params", max_chars=MAX_INPUT, height=160,
                        placeholder=ctx.t("evidence.placeholder"), help=ctx.t("evidence.help", limit_kib=MAX_INPUT // 1024))
    if not (text or "").strip():
        st.info(ctx.t("evidence.empty"))
    else:
        try:
            _show(ctx, text)
        except CalculatorError as error:
            show_error(ctx, error)


def _case(ctx: Context) -> Case:
    resolved = ctx.case
    if resolved is None:
        return Case()
    return Case(model=resolved.model, card=resolved.card, dtype=resolved.dtype)


def _show(ctx: Context, text: str) -> None:
    evidence = read(text)
    comparison = compare(evidence, _case(ctx))
    st.markdown(ctx.t("evidence.read_as", kind=kind_name(evidence.kind, ctx.lang)))
    rows = figure_rows(evidence, ctx.lang, _quote)
    if rows:
        st.dataframe([{ctx.t("evidence.col_what"): k, ctx.t("evidence.col_value"): v} for k, v in rows],
                     hide_index=True)
    found, advice = lines(evidence, comparison, ctx.lang, _quote)
    if found:
        st.markdown(f"**{ctx.t('evidence.compare_title')}**")
        st.markdown("\n".join(f"- {ctx.localized(line)}" for line in found))
    if advice:
        st.markdown(f"**{ctx.t('evidence.advice_title')}**")
        for line in advice:
            st.info(ctx.localized(line))
    answer_text_box(ctx, _answer(ctx, evidence, comparison))


def _answer(ctx: Context, evidence, comparison) -> str:
    """The reading as the answer to paste: its link opens this section on the page's case, its
    command reads the same text (saved as pasted.txt) against the same case."""
    from guide.case_bar import pinned_link_pairs

    pairs = tuple(pair for pair in pinned_link_pairs(ctx.lang, ctx.case) if pair[0] != "lang")
    link = section_link(ctx.slug, ctx.anchor, pairs, ctx.lang, guide_base())
    case = {} if ctx.case is None else {"model": ctx.case.model.key or ctx.case.model.name,
                                        "gpu": ctx.case.card.key, "dtype": str(ctx.case.dtype)}
    return answer_markdown(evidence, comparison, ctx.lang, link, read_command("pasted.txt", case))


WIDGET = Widget(name="evidence", render=render, params=(Param("ev_text", EXAMPLE, "text"),))
