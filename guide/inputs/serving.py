"""Inputs the serving chapter's calculators share. Their options are the engines' own names
(vllm, sglang, float8...), the same in both languages, so a URL means the same thing to every
reader."""

from __future__ import annotations

import streamlit as st

from calculator.serving.engines import ENGINE_NAMES, ENGINES, KV_DTYPES, WEIGHT_DTYPES
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


def asked_dtype(ctx: Context, inputs) -> str | None:
    """The precision to ask `serve` for: None when neither the link nor this calculator set one,
    so the engine chooses as `serve` does without --dtype (calculator.serving.weights.default_weights:
    the checkpoint's own format when the engine runs it on the card, else bfloat16)."""
    if "dtype" in inputs.changed or ctx.case is None or ctx.case.dtype_source == "given":
        return inputs.dtype
    return None


def dtype_args(plan) -> tuple[str, ...]:
    """The answer's --dtype: only when one was asked for, so the command prints the page's
    answer, `dtype_source` included."""
    return ("--dtype", plan.dtype) if plan.dtype_source == "given" else ()


def shipped_note(ctx: Context, model, card, engine: str, plan) -> None:
    """Say where the precision came from when the checkpoint's format decides it: priced as it
    ships when none was set (as `serve` without --dtype); or, when another precision was set
    on a checkpoint the engine loads as it ships (gpt-oss's MXFP4 experts in vLLM), that it ships so."""
    from calculator.serving.weights import default_weights

    if engine_note(ctx, engine, plan):
        return
    if plan.dtype_source == "as_shipped":
        st.info(ctx.t("serving.priced_as_shipped", fmt=plan.dtype), icon=":material/info:")
        return
    if plan.dtype_source == "shipped_not_run":
        from calculator.serving.weights import shipped_refusal

        refused = shipped_refusal(model, card, engine, plan.engine_version)
        if refused is not None:
            st.warning(ctx.t("serving.shipped_not_run", fmt=refused[0], engine=ENGINE_NAMES[engine],
                             reason=refused[1].message(ctx.lang), dtype=plan.dtype), icon=":material/warning:")
        return
    if plan.dtype_source == "default":
        from calculator.answers.serving_json import dtype_fallback_of

        fallback = dtype_fallback_of(model, plan)
        if fallback is not None:  # vLLM's --dtype auto does not keep the checkpoint's dtype on this card
            st.info(ctx.t(f"serving.fallback_{fallback['reason']}", dtype=fallback["checkpoint"],
                          served=fallback["served"], model_type=fallback["model_type"]), icon=":material/info:")
            return
    shipped, why = default_weights(model, card, engine)
    if why == "as_shipped" and shipped != plan.dtype:
        st.info(ctx.t("serving.as_shipped", fmt=shipped, dtype=plan.dtype), icon=":material/info:")


def engine_note(ctx: Context, engine: str, plan) -> bool:
    """With no precision set, the bar shows vLLM's choice (gpt-oss: mxfp4); another engine
    makes its own, as `serve --engine` does (calculator.serving.weights.default_weights):
    say so when they differ. True when said."""
    bar = ctx.case.dtype if ctx.case is not None and ctx.case.dtype_source == "as_shipped" else None
    if plan.dtype_source not in ("default", "shipped_not_run") or bar in (None, plan.dtype):
        return False
    st.info(ctx.t("serving.engine_precision", engine=engine, fmt=bar, dtype=plan.dtype), icon=":material/info:")
    return True
