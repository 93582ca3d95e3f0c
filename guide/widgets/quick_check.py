"""home#quick-check: does the case's model load on its GPU? The rule of thumb, the exact
weights and the verdict against what the card gives a process."""

from __future__ import annotations

import streamlit as st

from calculator.answers.verdicts import load_answer
from calculator.core.errors import CalculatorError
from guide.case import dtype_choices
from guide.format import format_billions, format_bytes, format_number
from guide.widgets import Context, Param, Widget, answer_with, gpu_param, show_error
from guide.inputs.common import case_inputs, readings_row


def answer_for(inputs):
    """The page's request to the engine (pure: the parity test calls it without Streamlit): a
    precision or a format's real layout (bnb-nf4, mxfp4, Q4_K...), as `estimate --dtypes` prices it."""
    return load_answer(inputs.model, inputs.card, inputs.dtype)


def _decimals(size: float) -> int:
    """Whole bytes as they are (2, 4); a half byte (int4) with one decimal; a format's average
    (its scales included: 0.53 for bnb-nf4) with two."""
    return 0 if size == int(size) else 1 if size * 2 == int(size * 2) else 2


def paste_answer(model, card, dtype: str):
    """`estimate MODEL --gpu CARD --dtypes DTYPE`'s answer: its JSON (answers_estimate), its verdict."""
    from calculator.answers.markdown import answer_for as answer_of
    from calculator.answers.estimate_json import estimate_json

    typed = model.key or model.name
    argv = (typed, "--gpu", card.key, "--dtypes", dtype)
    return answer_of("estimate", estimate_json(model, (dtype,), card), argv, typed)


def render(ctx: Context) -> None:
    inputs = case_inputs(ctx, {"model": "qc_model", "dtype": "qc_dtype", "gpu": "qc_gpu"}, dtypes=dtype_choices())
    summary, card, lang = inputs.model.summary, inputs.card, ctx.lang
    try:
        answer = answer_for(inputs)
    except CalculatorError as error:  # a format the model's shapes cannot take
        show_error(ctx, error)
        return
    dtype, verdict, rule = answer.figures["dtype"], answer.verdict, answer.figures["rule_of_thumb_bytes"]
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("quick_check.rule"), format_bytes(rule, lang))
    m2.metric(ctx.t("quick_check.exact"), format_bytes(answer.figures["total_bytes"], lang))
    m3.metric(ctx.t("quick_check.capacity"), format_bytes(answer.figures["usable_bytes"], lang))
    st.markdown(ctx.t("quick_check.formula", params=format_billions(summary.parameters, lang),
                      bytes=format_number(answer.figures["bytes_per_param"], _decimals(answer.figures["bytes_per_param"]),
                                          lang),
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
