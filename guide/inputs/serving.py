"""Inputs the serving chapter's calculators share. Their options are the engines' own names
(vllm, sglang, float8...), the same in both languages, so a URL means the same thing to every
reader."""

from __future__ import annotations

import streamlit as st

from calculator.serving.engines import ENGINES, KV_DTYPES, WEIGHT_DTYPES
from calculator.serving.weights import SERVED_FORMATS
from guide.format import format_count
from guide.widgets import Context

KV_CHOICES = tuple(k for k in KV_DTYPES if k != "float32")
# what a calculator of the chapter may set for itself: the plain dtypes and the formats priced
# in vLLM's own layout (mxfp4, nvfp4, fp8-block128, torchao-int4/int8); the case may hold any format
WEIGHT_CHOICES = (*WEIGHT_DTYPES, *SERVED_FORMATS)


def kv_picker(ctx: Context, key: str, container=st) -> str:
    return container.selectbox(ctx.t("serving.kv_dtype"), list(KV_CHOICES), key=key, bind="query-params",
                               help=ctx.t("serving.kv_dtype_help"))


def engine_picker(ctx: Context, key: str, container=st, choices=ENGINES) -> str:
    return container.selectbox(ctx.t("serving.engine"), list(choices), key=key, bind="query-params",
                               help=ctx.t("serving.engine_help"))


def share_input(ctx: Context, key: str, container=st) -> float | None:
    """The engine's share of the card; empty, it is the engine's own default (vLLM's 0.92,
    SGLang's table on the card and the tensor-parallel size), chosen in calculator.serving.engines."""
    value = container.number_input(ctx.t("serving.utilization"), min_value=0.05, max_value=1.0, value=None,
                                   step=0.01, format="%.2f", key=key, bind="query-params",
                                   placeholder=ctx.t("serving.engine_default_share"),
                                   help=ctx.t("serving.utilization_help"))
    return float(value) if value is not None else None


def count_input(ctx: Context, label_key: str, key: str, default: int, low: int = 1, high: int = 1_048_576,
                step: int = 1, container=st, help_key: str | None = None) -> int:
    return int(container.number_input(ctx.t(label_key), min_value=low, max_value=high, value=default, step=step,
                                      key=key, bind="query-params", help=ctx.t(help_key) if help_key else None))


def limit_input(ctx: Context, label_key: str, key: str, low: int, high: int, step: int = 1, container=st,
                help_key: str | None = None) -> int | None:
    """A scheduler limit that stays empty unless the reader or the link sets one: empty means
    vLLM's own default for the card (calculator.serving.vllm.default_limits, chosen in the engine)."""
    value = container.number_input(ctx.t(label_key), min_value=low, max_value=high, value=None, step=step, key=key,
                                   bind="query-params", placeholder=ctx.t("serving.engine_default"),
                                   help=ctx.t(help_key) if help_key else None)
    return int(value) if value is not None else None


def serving_case(ctx: Context) -> tuple[int, int, int]:
    """(users, context, tensor) of the page's case: the serving question every calculator of
    the chapter answers (the chapter's defaults when the widget runs outside a page)."""
    from guide.chapters import by_slug

    case = ctx.case.case if ctx.case is not None else by_slug("serving").defaults
    return case.users, case.context, case.tensor


def case_count(ctx: Context, label_key: str, key: str, current: int, low: int = 1, high: int = 1_048_576,
               step: int = 1, container=st, help_key: str | None = None) -> int:
    """A number this calculator may set for itself; empty, it is the page's case."""
    value = container.number_input(ctx.t(label_key), min_value=low, max_value=high, value=None, step=step, key=key,
                                   bind="query-params", placeholder=f"{ctx.t('case.same_as_page')} {format_count(current, ctx.lang)}",
                                   help=ctx.t(help_key) if help_key else None)
    return int(value) if value is not None else current


def shipped_note(ctx: Context, model, card, engine: str, dtype: str) -> None:
    """Say so when the checkpoint ships in a format the engine loads as it is (gpt-oss's MXFP4
    experts in vLLM) and this calculator prices another precision: `serve` without --dtype
    prices the shipped format (calculator.serving.weights.default_weights)."""
    from calculator.serving.weights import default_weights

    shipped, why = default_weights(model, card, engine)
    if why == "as_shipped" and shipped != dtype:
        st.info(ctx.t("serving.as_shipped", fmt=shipped, dtype=dtype), icon=":material/info:")
