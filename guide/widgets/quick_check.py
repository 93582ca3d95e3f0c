"""home#quick-check: does the case's model load on its GPU? The rule of thumb, the exact
weights and the verdict against what the card gives a process."""

from __future__ import annotations

import streamlit as st

from calculator.core.precision import bytes_per_param
from calculator.answers.verdicts import load_answer
from guide.format import format_billions, format_bytes, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param
from guide.inputs.common import case_inputs, readings_row

DTYPES = ("float32", "float16", "bfloat16", "float8", "int8", "int4")


def answer_for(inputs):
    """The page's request to the engine (pure: the parity test calls it without Streamlit); a
    quantization format in the case is read as bfloat16 here."""
    return load_answer(inputs.model, inputs.card, inputs.dtype if inputs.dtype in DTYPES else "bfloat16")


def paste_answer(model, card, dtype: str):
    """`estimate MODEL --gpu CARD --dtypes DTYPE`'s answer: its JSON (answers_estimate), its verdict."""
    from calculator.answers.markdown import answer_for as answer_of
    from calculator.answers.estimate_json import estimate_json

    typed = model.key or model.name
    argv = (typed, "--gpu", card.key, "--dtypes", dtype)
    return answer_of("estimate", estimate_json(model, (dtype,), card), argv, typed)


def render(ctx: Context) -> None:
    inputs = case_inputs(ctx, {"model": "qc_model", "dtype": "qc_dtype", "gpu": "qc_gpu"}, dtypes=DTYPES)
    summary, card, lang = inputs.model.summary, inputs.card, ctx.lang
    answer = answer_for(inputs)
    dtype, verdict, rule = answer.figures["dtype"], answer.verdict, answer.figures["rule_of_thumb_bytes"]
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("quick_check.rule"), format_bytes(rule, lang))
    m2.metric(ctx.t("quick_check.exact"), format_bytes(answer.figures["total_bytes"], lang))
    m3.metric(ctx.t("quick_check.capacity"), format_bytes(answer.figures["usable_bytes"], lang))
    st.markdown(ctx.t("quick_check.formula", params=format_billions(summary.parameters, lang),
                      bytes=format_number(float(bytes_per_param(dtype)), 1 if dtype == "int4" else 0, lang),
                      rule=format_bytes(rule, lang)))
    readings_row(ctx, answer.detail, card)
    message = ctx.t(f"quick_check.verdict_{verdict}", gpu=card.name, model=inputs.model.name)
    {"fits": st.success, "tight": st.warning, "too_big": st.error}[verdict](message)
    if inputs.model.source in ("catalog", "hub"):  # a command line can name it (not an upload)
        answer_with(ctx, paste_answer(inputs.model, card, dtype))


WIDGET = Widget(
    name="quick-check",
    render=render,
    params=(Param("qc_model", "openai-community/gpt2", "choice"), Param("qc_dtype", "int4", "choice"), gpu_param("qc_gpu", "NVIDIA H100 SXM")),
)
