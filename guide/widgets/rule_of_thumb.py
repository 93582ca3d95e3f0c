"""memory-estimate#rule-of-thumb: billions of parameters x bytes per parameter x 1.1, with the
reader's own numbers written into the formula, in GB and in GiB."""

from __future__ import annotations

import streamlit as st

from calculator.answers.verdicts import load_answer
from calculator.core.errors import CalculatorError
from calculator.core.precision import DTYPES as PLAIN, RULE_OF_THUMB_MARGIN, bytes_per_param
from calculator.memory.estimate import rule_of_thumb_figures
from guide.case import dtype_choices
from guide.format import format_bytes, format_number
from guide.widgets import Context, Param, Widget, show_error
from guide.inputs.common import case_inputs

MAX_BILLIONS = 10_000.0  # ten trillion parameters: far beyond any model


def plain_number(value: float, lang: str, most: int = 3) -> str:
    """A number as the reader typed it: no trailing zeros, the reader's decimal mark."""
    decimals = 0
    while decimals < most and round(value, decimals) != round(value, most):
        decimals += 1
    return format_number(value, decimals, lang)


def bytes_per_case(inputs):
    """Bytes per parameter of the case's precision: a dtype's size, or a format's average over
    the case's model as `estimate --dtypes` prices it (load_answer's bytes_per_param)."""
    if inputs.dtype in PLAIN:
        return bytes_per_param(inputs.dtype)
    return load_answer(inputs.model, inputs.card, inputs.dtype).figures["bytes_per_param"]


def render(ctx: Context) -> None:
    lang = ctx.lang
    inputs = case_inputs(ctx, {"dtype": "rt_dtype"}, dtypes=dtype_choices())
    case_billions = inputs.model.summary.parameters / 1e9
    typed = st.number_input(ctx.t("rule_of_thumb.billions"), min_value=0.001, max_value=MAX_BILLIONS, value=None,
                            step=0.5, format="%g", key="rt_params", bind="query-params",
                            placeholder=ctx.t("rule_of_thumb.billions_placeholder", model=inputs.model.name,
                                              billions=plain_number(round(case_billions, 2), lang)),
                            help=ctx.t("rule_of_thumb.billions_help"))
    billions = typed if typed is not None else case_billions
    try:
        size = bytes_per_case(inputs)
    except CalculatorError as error:  # a format the model's shapes cannot take
        show_error(ctx, error)
        return
    if inputs.dtype not in PLAIN:  # a format: its average over the case's model, scales included
        st.caption(ctx.t("rule_of_thumb.format_average", fmt=inputs.dtype, model=inputs.model.name,
                         bytes=plain_number(float(size), lang)))
    parameters = max(1, round(billions * 1e9))
    weights, rule = rule_of_thumb_figures(parameters, size)
    st.markdown(ctx.t(
        "rule_of_thumb.formula",
        billions=plain_number(billions, lang), bytes=plain_number(float(size), lang),
        weights_gb=format_bytes(weights, lang, system="decimal"), weights_gib=format_bytes(weights, lang),
        margin=plain_number(float(RULE_OF_THUMB_MARGIN), lang),
        rule_gb=format_bytes(rule, lang, system="decimal"),
        rule_gib=format_bytes(rule, lang),
    ))
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("rule_of_thumb.weights"), format_bytes(weights, lang, system="decimal"))
    m2.metric(ctx.t("rule_of_thumb.with_margin"), format_bytes(rule, lang, system="decimal"))
    m3.metric(ctx.t("rule_of_thumb.as_gpu_tools_show"), format_bytes(rule, lang))


WIDGET = Widget(
    name="rule-of-thumb",
    render=render,
    params=(Param("rt_params", "70", "float"), Param("rt_dtype", "int4", "choice")),
)
