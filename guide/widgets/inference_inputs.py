"""Inputs of the inference-memory widgets (oom chapter). Their options are the calculator's
own technical names (sdpa, eager, generate, loglikelihood), the same in both languages, so
the URL means the same thing whatever the reader's language."""

from __future__ import annotations

import streamlit as st

from calculator.inference import ATTENTION, MODES
from guide.widgets import Context

KV_DTYPES = ("auto", "float16", "bfloat16", "float8", "int8")


def attention_picker(ctx: Context, key: str, container=st) -> str:
    return container.selectbox(ctx.t("oom.attention"), list(ATTENTION), key=key, bind="query-params",
                               help=ctx.t("oom.attention_help"))


def mode_picker(ctx: Context, key: str, container=st) -> str:
    return container.selectbox(ctx.t("oom.mode"), list(MODES), key=key, bind="query-params",
                               help=ctx.t("oom.mode_help"))


def kv_dtype_picker(ctx: Context, key: str, container=st) -> str | None:
    choice = container.selectbox(ctx.t("oom.kv_dtype"), list(KV_DTYPES), key=key, bind="query-params",
                                 help=ctx.t("oom.kv_dtype_help"))
    return None if choice == "auto" else choice


def moment(ctx: Context, name: str) -> str:
    """Where in the forward the peak comes, in words."""
    return ctx.t(f"oom.moment_{name}")
