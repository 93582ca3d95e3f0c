"""Home: does this model fit on this GPU? Rule of thumb, exact count, verdict."""

from __future__ import annotations

import streamlit as st

from calculator.budget import Budget
from calculator.estimate import fit_verdict
from calculator.precision import bytes_per_param, rule_of_thumb_bytes
from guide.format import format_billions, format_bytes
from guide.widgets import Context, Param, Widget, share_box
from guide.widgets.common import dtype_picker, gpu_picker, model_picker

KEYS = ("qc_model", "qc_dtype", "qc_gpu")


def render(ctx: Context) -> None:
    col1, col2, col3 = st.columns(3)
    summary = model_picker(ctx, "qc_model", container=col1).summary
    dtype = dtype_picker(ctx, "qc_dtype", container=col2)
    card = gpu_picker(ctx, "qc_gpu", container=col3)
    exact = summary.total_bytes_at(dtype)
    rule = rule_of_thumb_bytes(summary.parameters, dtype)
    verdict = fit_verdict(exact, rule, Budget(card))
    lang = ctx.lang
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("quick_check.rule"), format_bytes(rule, lang))
    m2.metric(ctx.t("quick_check.exact"), format_bytes(exact, lang))
    m3.metric(ctx.t("quick_check.capacity"), format_bytes(card.memory_bytes, lang))
    st.markdown(ctx.t("quick_check.formula", params=format_billions(summary.parameters, lang),
                      bytes=f"{float(bytes_per_param(dtype)):g}".replace(".", "," if lang == "fr" else "."),
                      rule=format_bytes(rule, lang)))
    message = ctx.t(f"quick_check.verdict_{verdict}", gpu=card.name)
    {"fits": st.success, "tight": st.warning, "too_big": st.error}[verdict](message)
    share_box(ctx, KEYS)


WIDGET = Widget(
    name="quick-check",
    render=render,
    params=(Param("qc_model", "openai-community/gpt2"), Param("qc_dtype", "int4"), Param("qc_gpu", "NVIDIA H100 SXM")),
)
