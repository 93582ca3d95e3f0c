""""Copy as answer": beside the share box, the calculation as a short Markdown answer in the
reader's language (calculator/answers/markdown.py writes it; st.code gives it a copy button). Its link
points at the guide the reader is on, with every value of the case."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlsplit

import streamlit as st

from calculator.answers.markdown import Answer, markdown


def guide_base() -> str | None:
    """This guide's address (scheme and host) as the reader's browser sees it."""
    parts = urlsplit(st.context.url or "")
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None


def answer_box(ctx, answer: Answer) -> None:
    answer = replace(answer, link=(ctx.slug, ctx.anchor, answer.link[2]))  # the section the reader is on
    answer_text_box(ctx, markdown(answer, ctx.lang, guide_base()))


def answer_text_box(ctx, written: str) -> None:
    """The "Copy as answer" popover around an answer already written in the reader's language."""
    with st.popover(ctx.t("answer.title"), icon=":material/content_copy:"):
        st.caption(ctx.t("answer.help"))
        st.code(written, language="markdown", wrap_lines=True)
