"""Where a calculator's model comes from: the bundled catalog (search as you type), a Hub id,
or an uploaded config.json. Shared by the memory-estimate and estimator chapters.

The catalog model and the Hub id are bound to the URL (both are the same in every
language); an uploaded file cannot travel in a URL, and the share box says so. Precedence:
an uploaded file, else a Hub id, else the catalog model.

Safety: the page never reads a server path (allow_local=False), never runs a repository's
code, validates a Hub id before any request, caps and parses uploads itself, and shows what
a user typed as plain text. Slow work runs behind a spinner and is cached, bounded, per
input (Streamlit locks one cache key at a time, never the whole cache).
"""

from __future__ import annotations

from dataclasses import dataclass
import json

import streamlit as st

from calculator import catalog
from calculator.architecture import ArchSpec
from calculator.configs import MAX_CONFIG_BYTES, parse_config_text
from calculator.errors import CalculatorError
from calculator.estimate import header_count_reason, resolve_config, resolve_model
from calculator.hub import check_hub_id, fetch_config
from calculator.messages import text
from calculator.safetensors import HeaderCount, read_headers
from calculator.summary import ModelSummary
from guide.format import escape_markdown
from guide.widgets import Context, share_box

# The server refuses uploads over 1 MB (.streamlit/config.toml); this is checked here too,
# in case the page runs under another configuration.
MAX_UPLOAD_BYTES = min(MAX_CONFIG_BYTES, 2**20)
HUB_CACHE_SECONDS = 300  # a Hub answer (or a Hub error) is reused this long


@dataclass(frozen=True)
class Choice:
    """What the reader picked, before anything is counted."""

    kind: str  # catalog, hub, upload
    name: str  # catalog key, Hub id, or the uploaded file's name
    raw: bytes = b""  # the uploaded file
    size: int = 0


@dataclass(frozen=True)
class Counted:
    """A model the reader picked, counted, with where the figures come from."""

    name: str  # shown to the reader: the Hub id, or the uploaded file's name
    source: str  # catalog, hub, upload, safetensors
    summary: ModelSummary
    spec: ArchSpec | None  # None when only the safetensors headers were read
    stored: HeaderCount | None = None  # the checkpoint's safetensors headers, when read
    reason: str | None = None  # why the headers were read: remote_code, unknown_type, quantized, no_config


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


def count_choice(ctx: Context, choice: Choice, model_class: str = "auto") -> Counted | None:
    """Count what the reader picked, with a spinner for slow work. On bad input: a clear
    message in the reader's language, and None."""
    try:
        if choice.kind == "upload":
            return _count_upload(ctx, choice, model_class)
        if choice.kind == "hub":
            return _count_hub(ctx, choice.name, model_class)
        model = resolve_model(choice.name, model_class, allow_local=False)
        return Counted(model.name, "catalog", model.summary, model.spec)
    except CalculatorError as error:
        show_error(ctx, error)
        return None


def show_error(ctx: Context, error: CalculatorError) -> None:
    """The error in the reader's language; its parameters (names people typed) as plain text."""
    params = {key: escape_markdown(value, 160) for key, value in error.params.items()}
    st.error(text(f"error.{error.code}", ctx.lang, **params), icon=":material/error:")


def _count_upload(ctx: Context, choice: Choice, model_class: str) -> Counted:
    if not choice.name.lower().endswith(".json"):
        raise CalculatorError("upload_not_json_name")
    if choice.size > MAX_UPLOAD_BYTES or len(choice.raw) > MAX_UPLOAD_BYTES:
        raise CalculatorError("upload_too_large", size=f"{choice.size:,}", limit=f"{MAX_UPLOAD_BYTES:,}")
    config = parse_config_text(choice.raw, name=choice.name)
    with st.spinner(ctx.t("model_source.building", name=escape_markdown(choice.name)), show_time=True):
        summary, spec = _unwrap(_count_config(json.dumps(config, sort_keys=True), model_class))
    return Counted(choice.name, "upload", summary, spec)


def _count_hub(ctx: Context, name: str, model_class: str) -> Counted:
    entry = catalog.find(name)
    if entry is not None:  # a catalog checkpoint: its stored count, no request at all
        model = resolve_model(entry.key, model_class, allow_local=False)
        return Counted(model.name, "catalog", model.summary, model.spec)
    repo = check_hub_id(name)  # before any request
    with st.spinner(ctx.t("model_source.fetching", repo=escape_markdown(repo)), show_time=True):
        config, error = _hub_config(repo)  # raises at once when the Hub is unreachable
    if error is not None and error[0] != "hub_no_config":
        raise CalculatorError(error[0], **error[1])
    reason = "no_config" if config is None else header_count_reason(config)
    stored = None
    if reason is not None:
        with st.spinner(ctx.t("model_source.reading_headers", repo=escape_markdown(repo)), show_time=True):
            try:
                stored, header_error = _headers(repo)
            except CalculatorError as error:  # unreachable: not cached
                stored, header_error = None, (error.code, error.params)
        if header_error is not None and reason != "quantized":
            if header_error[0] == "no_safetensors":  # say both halves: why headers, and none
                raise CalculatorError(f"{reason}_no_safetensors", repo=repo,
                                      model_type=str((config or {}).get("model_type", ""))[:60])
            raise CalculatorError(header_error[0], **header_error[1])
    if reason in ("remote_code", "unknown_type", "no_config"):
        architectures = (config or {}).get("architectures")
        architecture = str(architectures[0])[:80] if isinstance(architectures, list) and architectures else ""
        summary = stored.summary(architecture, str((config or {}).get("model_type", ""))[:60])
        return Counted(repo, "safetensors", summary, None, stored, reason)
    with st.spinner(ctx.t("model_source.building", name=escape_markdown(repo)), show_time=True):
        summary, spec = _unwrap(_count_config(json.dumps(config, sort_keys=True), model_class))
    return Counted(repo, "hub", summary, spec, stored, reason)


def _unwrap(outcome):
    """Cached outcomes hold either a value or an error (errors are cached too, so a page
    rerun does not ask the Hub again): raise the error, return the value."""
    value, error = outcome
    if error is not None:
        raise CalculatorError(error[0], **error[1])
    return value


def _outcome(work):
    """A value or an error, to cache. An unreachable Hub is not cached: it is raised, so the
    next rerun asks again (a blip must not keep a model away for minutes)."""
    try:
        return work(), None
    except CalculatorError as error:
        if error.code == "hub_unreachable":
            raise
        return None, (error.code, error.params)


@st.cache_data(max_entries=64, ttl=HUB_CACHE_SECONDS, show_spinner=False)
def _hub_config(repo: str):
    return _outcome(lambda: fetch_config(repo))


@st.cache_data(max_entries=32, ttl=HUB_CACHE_SECONDS, show_spinner=False)
def _headers(repo: str):
    return _outcome(lambda: read_headers(repo))


@st.cache_data(max_entries=32, show_spinner=False)
def _count_config(config_json: str, model_class: str):
    """A config counted on the meta device; never with remote code (resolve_config)."""
    def work():
        model = resolve_config(json.loads(config_json), "", model_class)
        return model.summary, model.spec
    return _outcome(work)


def source_label(ctx: Context, counted: Counted) -> str:
    """One line saying which model the figures are for and where they come from."""
    return ctx.t(f"model_source.counted_{counted.source}", name=escape_markdown(counted.name))


def share(ctx: Context, choice: Choice, keys: tuple[str, ...]) -> None:
    """The share box. An uploaded file cannot travel in a URL: say so."""
    note = ctx.t("model_source.share_upload") if choice.kind == "upload" else None
    share_box(ctx, keys, note=note)
