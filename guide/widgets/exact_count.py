"""memory-estimate#exact-count: the case's model (catalog, Hub id or uploaded config.json)
built on the meta device, and its memory in each precision. The estimator chapter has the
full tool; a link opens it on the same model."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from calculator.memory.estimate import rows_for
from guide.case_bar import carried_query
from guide.widgets import Context, Param, Widget, answer_with, share_note
from guide.inputs.common import case_inputs, counted_model, source_label
from guide.inputs.estimate_table import estimate_answer, parameters_line, records, table



def render(ctx: Context) -> None:
    inputs = case_inputs(ctx, {"model": "ec_model"}, legacy={"model": "ec_hub"}, headers=True)
    if inputs.failed:  # the model asked for could not be read: its message is shown, no other table
        return
    counted = counted_model(ctx, inputs)
    if counted is None:
        return
    st.markdown(f"{source_label(ctx, counted)} {parameters_line(ctx, counted.summary)}.")
    if counted.reason in ("remote_code", "unknown_type", "no_config"):
        st.caption(ctx.t("exact_count.from_headers"))
    rows = rows_for(counted.summary)
    headers, cells = table(ctx, rows)
    st.dataframe(records(headers, cells), hide_index=True, key="ec_table")
    st.caption(ctx.t("estimate_table.note"))
    if counted.source != "upload":
        st.markdown(ctx.t("exact_count.open_estimator", url=estimator_link(ctx, counted)))
    if counted.source in ("catalog", "hub"):  # a command line can name it (not an upload)
        answer_with(ctx, estimate_answer(counted, [row.dtype for row in rows]))
    share_note(ctx, ctx.t("model_source.share_upload") if counted.source == "upload" else None)


def estimator_link(ctx: Context, model) -> str:
    """The estimator chapter, opened on the same case (the calculator's own model, if it has one)."""
    query = {**carried_query(ctx.lang), "model": model.key or model.load_id or model.name}
    return f"estimator?{urlencode(query, safe='/')}#estimate"


WIDGET = Widget(
    name="exact-count",
    render=render,
    params=(Param("ec_model", "Qwen/Qwen3-30B-A3B", "choice"),),
)
