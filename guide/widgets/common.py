"""Inputs that many widgets share. Each is bound to the URL under the key it is given."""

from __future__ import annotations

import streamlit as st

from calculator import catalog
from calculator.model import Model, catalog_model
from calculator.gpus import Gpu, gpus
from calculator.precision import DTYPES
from guide.widgets import URL_FORMS, Context


def model_id(key: str) -> str:
    """A catalog model as readers know it, and as it appears in URLs: its Hub id."""
    return catalog.find(key).id


def gpu_name(key: str) -> str:
    return gpus()[key].name


def model_picker(ctx: Context, key: str, default: str = "llama-3-8b", container=st) -> Model:
    """A catalog model (the id is shown and put in the URL: the same in both languages)."""
    entries = {e.key: e for e in catalog.entries()}
    keys = list(entries)
    URL_FORMS[key] = model_id
    choice = container.selectbox(ctx.t("common.model"), keys, index=keys.index(default), key=key,
                                 format_func=model_id, bind="query-params",
                                 help=ctx.t("common.model_help"))
    return catalog_model(choice)


def gpu_picker(ctx: Context, key: str, default: str = "rtx4090", container=st) -> Gpu:
    cards = gpus()
    keys = list(cards)
    URL_FORMS[key] = gpu_name
    choice = container.selectbox(ctx.t("common.gpu"), keys, index=keys.index(default), key=key,
                                 format_func=gpu_name, bind="query-params",
                                 help=ctx.t("common.gpu_help"))
    return cards[choice]


def dtype_picker(ctx: Context, key: str, default: str = "bfloat16", container=st, options=DTYPES) -> str:
    options = list(options)
    return container.selectbox(ctx.t("common.dtype"), options, index=options.index(default), key=key,
                               bind="query-params", help=ctx.t("common.dtype_help"))


def tokens_input(ctx: Context, label_key: str, key: str, default: int, low: int = 1, high: int = 1_048_576,
                 container=st, step: int = 128) -> int:
    return int(container.number_input(ctx.t(label_key), min_value=low, max_value=high, value=default, step=step,
                                      key=key, bind="query-params"))
