"""memory-estimate#exact-count: any model (catalog, Hub id or uploaded config.json) built on
the meta device, and its memory in each precision. The estimator chapter has the full tool;
a link opens it on the same model."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from calculator.estimate import rows_for
from guide.widgets import Context, Param, Widget
from guide.widgets.estimate_table import parameters_line, records, table
from guide.widgets.model_source import count_choice, share, source_inputs, source_keys, source_label

PREFIX = "ec"
KEYS = source_keys(PREFIX)


def render(ctx: Context) -> None:
    choice = source_inputs(ctx, PREFIX, default="mistral-7b-v0.1")
    counted = count_choice(ctx, choice)
    if counted is not None:
        st.markdown(f"{source_label(ctx, counted)} {parameters_line(ctx, counted.summary)}.")
        if counted.reason in ("remote_code", "unknown_type", "no_config"):
            st.caption(ctx.t("exact_count.from_headers"))
        headers, cells = table(ctx, rows_for(counted.summary))
        st.dataframe(records(headers, cells), hide_index=True, key="ec_table")
        st.caption(ctx.t("estimate_table.note"))
        if choice.kind != "upload":
            st.markdown(ctx.t("exact_count.open_estimator", url=estimator_link(ctx, choice.kind, counted.name)))
    share(ctx, choice, KEYS)


def estimator_link(ctx: Context, kind: str, name: str) -> str:
    """The estimator chapter, opened on the same model (a catalog model or a Hub id)."""
    key = "es_model" if kind == "catalog" else "es_hub"
    return f"estimator?{urlencode({'lang': ctx.lang, key: name})}#estimate"


WIDGET = Widget(
    name="exact-count",
    render=render,
    params=(Param("ec_model", "Qwen/Qwen3-30B-A3B"), Param("ec_hub", "google/gemma-2-9b")),
)
