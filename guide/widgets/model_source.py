"""Where a calculator's model comes from: the bundled catalog (search as you type), a Hub id,
or an uploaded config.json. Shared by the memory-estimate and estimator chapters.

The catalog model and the Hub id are bound to the URL (both are the same in every
language); an uploaded file cannot travel in a URL, and the share box says so. Precedence:
an uploaded file, else a Hub id, else the catalog model.

Which model it is, and whether a Hub checkpoint is counted from its safetensors headers, is
decided by the model seam (calculator/model.py), which also caps uploads, checks Hub ids
before any request and caches counts and Hub answers. This widget gathers the choice, shows
slow steps behind a spinner, and shows what a user typed as plain text.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from calculator import catalog
from calculator.errors import CalculatorError
from calculator.model import MAX_UPLOAD_BYTES, Model, resolve, resolve_upload
from calculator.messages import text
from guide.format import escape_markdown
from guide.widgets import Context, share_box


@dataclass(frozen=True)
class Choice:
    """What the reader picked, before anything is counted."""

    kind: str  # catalog, hub, upload
    name: str  # catalog key, Hub id, or the uploaded file's name
    raw: bytes = b""  # the uploaded file
    size: int = 0


def source_keys(prefix: str) -> tuple[str, str]:
    """The URL keys of a model source: the catalog model and the Hub id."""
    return f"{prefix}_model", f"{prefix}_hub"


def source_inputs(ctx: Context, prefix: str, default: str = "llama-3-8b") -> Choice:
    """The three ways to name a model. Returns what the reader picked."""
    model_key, hub_key = source_keys(prefix)
    ids = [entry.id for entry in catalog.entries()]
    c1, c2 = st.columns(2)
    picked = c1.selectbox(ctx.t("model_source.catalog"), ids, index=ids.index(catalog.find(default).id),
                          key=model_key, bind="query-params", help=ctx.t("model_source.catalog_help"),
                          on_change=_forget_hub_id, args=(hub_key,))
    hub_id = c2.text_input(ctx.t("model_source.hub"), key=hub_key, bind="query-params", max_chars=200,
                           placeholder=ctx.t("model_source.hub_placeholder"), help=ctx.t("model_source.hub_help"))
    upload = st.file_uploader(ctx.t("model_source.upload"), type=None, accept_multiple_files=False,
                              key=f"{prefix}_upload", help=ctx.t("model_source.upload_help"))
    if upload is not None:
        return Choice("upload", upload.name, upload.getvalue()[: MAX_UPLOAD_BYTES + 1], upload.size)
    if hub_id and hub_id.strip():
        return Choice("hub", hub_id.strip())
    return Choice("catalog", catalog.find(picked).key)


def _forget_hub_id(hub_key: str) -> None:
    """Picking a catalog model is a choice for it: clear a Hub id that would take precedence."""
    st.session_state[hub_key] = ""


def count_choice(ctx: Context, choice: Choice, model_class: str = "auto") -> Model | None:
    """Count what the reader picked through the model seam, with a spinner for slow work. On
    bad input: a clear message in the reader's language, and None."""
    def spinner(step: str, name: str):
        return st.spinner(ctx.t(f"model_source.{step}", name=escape_markdown(name), repo=escape_markdown(name)),
                          show_time=True)

    try:
        if choice.kind == "upload":
            return resolve_upload(choice.raw, choice.name, choice.size, model_class, progress=spinner)
        typed_hub_id = choice.kind == "hub"
        return resolve(choice.name, model_class, read_headers=typed_hub_id, hub_id=typed_hub_id, progress=spinner)
    except CalculatorError as error:
        show_error(ctx, error)
        return None


def show_error(ctx: Context, error: CalculatorError) -> None:
    """The error in the reader's language; its parameters (names people typed) as plain text."""
    params = {key: escape_markdown(value, 160) for key, value in error.params.items()}
    st.error(text(f"error.{error.code}", ctx.lang, **params), icon=":material/error:")


def source_label(ctx: Context, counted: Model) -> str:
    """One line saying which model the figures are for and where they come from."""
    return ctx.t(f"model_source.counted_{counted.source}", name=escape_markdown(counted.name))


def share(ctx: Context, choice: Choice, keys: tuple[str, ...]) -> None:
    """The share box. An uploaded file cannot travel in a URL: say so."""
    note = ctx.t("model_source.share_upload") if choice.kind == "upload" else None
    share_box(ctx, keys, note=note)
