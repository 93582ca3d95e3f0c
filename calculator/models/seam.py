"""The model seam: which model is this, counted.

Every widget, every CLI command and the accuracy harness name a model here and nowhere else:
a catalog name, a path to a config (CLI only), a Hugging Face Hub id, or an uploaded
config.json go in; one immutable `Model` comes out, with where it came from, its config, the
exact meta-device count (`ModelSummary`), its shape (`ArchSpec`) and how its layers compute
(`ModelTraits`). When the config alone cannot count a Hub checkpoint (its code lives in the
repository, this transformers has no class for it, or it is already quantized) and the
caller asks for it, the checkpoint's safetensors headers are read instead, and the record
says why.

A config is made into a transformers config once (meta.count) and counted once per content
(a cache bounded in entries and in bytes, errors included); a Hub answer is reused for a few
minutes, an unreachable or stalled Hub for half a minute (calculator/models/hub.py bounds each
read in bytes and time). Safety: the page never reads a server
path (allow_local=False) and never runs a repository's code (trust_remote_code is for the
CLI); a Hub id is checked before any request; an upload is capped and parsed here; keys that
choose code at load time (attention implementations, kernels) are removed from every config
given; and the count itself, the one step that builds a model, runs in a worker process with
a memory and a time limit (calculator/models/builder.py), so no config can exhaust the process that
asked for it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import lru_cache
import json
from pathlib import Path
import pickle
import threading
import time

from calculator.models import builder

from calculator.models import catalog
from calculator.models.architecture import ArchSpec
from calculator.models.configs import MAX_CONFIG_BYTES, check_config, parse_config_text, read_config_file, without_runtime_keys
from calculator.core.errors import CalculatorError, Grouped
from calculator.models.families import ModelTraits, traits_from_config
from calculator.models.hub import Deadline, check_hub_id, fetch_config, is_hub_id
from calculator.models.meta import MODEL_CLASSES
from calculator.models.summary import ModelSummary

SOURCES = ("catalog", "local", "hub", "upload", "safetensors")
# Why a Hub checkpoint was counted from its safetensors headers.
HEADER_REASONS = ("remote_code", "unknown_type", "quantized", "no_config")
# One number everywhere: the server's maxUploadSize (.streamlit/config.toml, in MB: the
# browser refuses past 1,000,000 bytes), the help texts, and this check.
MAX_UPLOAD_BYTES = min(MAX_CONFIG_BYTES, 1_000_000)
HUB_CACHE_SECONDS = 300
# An unreachable or stalled Hub is kept this long: a rerun of the page does not pay the
# deadline again, and a blip does not keep a model away for long.
HUB_FAILURE_SECONDS = 30
MAX_NAME_CHARS = 1024
COUNT_CACHE_ENTRIES = 32
COUNT_CACHE_BYTES = 32 * 2**20  # configs (an upload is at most 1 MiB) and their counts
HUB_CACHE_ENTRIES = 96
HUB_CACHE_BYTES = 64 * 2**20  # configs (at most 2 MiB) and safetensors header counts

# progress(step, name) -> a context manager shown around slow work (the page's spinner):
# step is "fetching", "reading_headers" or "building".
Progress = Callable[[str, str], AbstractContextManager]


@dataclass(frozen=True)
class Model:
    """A model someone named, counted."""

    name: str  # as shown: the catalog checkpoint's Hub id, a Hub id, a config's path, an upload's file name
    source: str  # catalog, local, hub, upload, safetensors (only the headers could count it)
    summary: ModelSummary
    spec: ArchSpec | None  # None when only the safetensors headers were read
    traits: ModelTraits
    config_json: str = ""  # the config, as sorted JSON ("" when there is none)
    key: str | None = None  # the catalog key
    load_id: str = ""  # what from_pretrained takes: a Hub id or a local folder ("" for an upload)
    headers: object | None = None  # safetensors.HeaderCount, when the headers were read
    reason: str | None = None  # why they were read: one of HEADER_REASONS

    @property
    def config(self) -> dict | None:
        """A fresh copy of the config dict (None when the checkpoint has none)."""
        return json.loads(self.config_json) if self.config_json else None


def check_model_class(model_class: str) -> str:
    if model_class not in MODEL_CLASSES:
        raise CalculatorError("unknown_model_class", value=str(model_class)[:40], choices=", ".join(MODEL_CLASSES))
    return model_class


def source_of(name: str, allow_local: bool) -> str:
    """Which source a model name designates: an existing path (CLI only), a catalog model, or
    a Hub id. The page passes allow_local=False: it never reads a server path."""
    if not isinstance(name, str) or not name.strip():
        raise CalculatorError("model_not_found", name="")
    name = name.strip()
    if len(name) > MAX_NAME_CHARS:  # no path, catalog name or Hub id is this long
        raise CalculatorError("model_not_found", name=name[:80])
    if allow_local and _is_path(name):
        return "local"
    if catalog.find(name) is not None:
        return "catalog"
    if is_hub_id(name):
        return "hub"
    raise CalculatorError("model_not_found", name=name[:80])


def _is_path(name: str) -> bool:
    """Whether a name is an existing path; a name no file system can hold (too long, an
    unknown ~user, a NUL byte) is not one."""
    try:
        return Path(name).expanduser().exists()
    except (OSError, RuntimeError, ValueError):
        return False


_remote_code_forbidden = False


def check_model_name(name: str) -> str:
    """A catalog name or a well-formed Hub id, else the Hub id's refusal, before any request
    (what an MCP client may name: never a path)."""
    return name if catalog.find(name) is not None else check_hub_id(name)


def forbid_remote_code() -> None:
    """From now on this process never runs a repository's code, whatever a caller asks: the
    MCP server says so at its start, so no argument a client sends can turn it on."""
    global _remote_code_forbidden
    _remote_code_forbidden = True


def resolve(name: str, model_class: str = "auto", *, allow_local: bool = False, trust_remote_code: bool = False,
            read_headers: bool = False, hub_id: bool = False, progress: Progress | None = None) -> Model:
    """The one entry point: a catalog name, a local config (allow_local, CLI only) or a Hub id.
    read_headers: count a Hub checkpoint from its safetensors headers when its config cannot
    (the page does; the CLI has a command of its own for headers). hub_id: the name was typed
    as a Hub id, so a malformed one is refused as such (a catalog checkpoint still needs no
    request)."""
    check_model_class(model_class)
    if trust_remote_code and _remote_code_forbidden:
        raise CalculatorError("remote_code_refused")
    if hub_id and catalog.find(name) is None:
        check_hub_id(name)
    source = source_of(name, allow_local)
    name = name.strip()
    if source == "catalog":
        return catalog_model(catalog.find(name).key, model_class)
    if source == "local":
        return _local(name, model_class, trust_remote_code)
    if trust_remote_code:
        return _hub_remote(name, model_class)
    return _hub(check_hub_id(name), model_class, read_headers, progress or _quiet_progress)


def resolve_upload(raw: bytes, filename: str, size: int | None = None, model_class: str = "auto",
                   progress: Progress | None = None) -> Model:
    """An uploaded config.json: capped, parsed and counted (never with remote code)."""
    check_model_class(model_class)
    if not str(filename).lower().endswith(".json"):
        raise CalculatorError("upload_not_json_name")
    size = len(raw) if size is None else size
    if size > MAX_UPLOAD_BYTES or len(raw) > MAX_UPLOAD_BYTES:
        raise CalculatorError("upload_too_large", size=Grouped(size), limit=Grouped(MAX_UPLOAD_BYTES))
    config = parse_config_text(raw, name=filename)
    return resolve_config(config, filename, source="upload", model_class=model_class, progress=progress)


def resolve_config(config: dict, name: str, source: str = "local", model_class: str = "auto",
                   progress: Progress | None = None, load_id: str = "") -> Model:
    """A config given as data (an upload, a measured model's config): never runs remote code."""
    check_model_class(model_class)
    config = without_runtime_keys(config)
    check_config(config)  # the cheap checks first, in this process: an absurd config never reaches a worker
    config_json = json.dumps(config, sort_keys=True)
    with (progress or _quiet_progress)("building", name):
        summary, spec = _counted(config_json, model_class)
    return Model(name, source, summary, spec, traits_from_config(config, summary.model_type), config_json,
                 load_id=load_id)


@lru_cache(maxsize=64)
def catalog_model(key: str, model_class: str = "auto") -> Model:
    """A catalog model from its stored count: no torch, no transformers."""
    entry = next(e for e in catalog.entries() if e.key == key)
    config = catalog.config(key)
    summary = catalog.stored_summary(key, model_class)
    return Model(entry.id, "catalog", summary, catalog.stored_spec(key), traits_from_config(config, summary.model_type),
                 json.dumps(config, sort_keys=True), key=key, load_id=entry.id)


def header_count_reason(config: dict) -> str | None:
    """Why a Hub checkpoint's safetensors headers should be read, given its config:
    "remote_code" (its classes live in the repository, and we never run that code),
    "unknown_type" (this transformers has no class for it), "quantized" (the config builds
    the full-precision model; the headers say what the checkpoint stores). None when the
    config alone gives the count. Absurd configs are refused first."""
    check_config(config)
    # The types transformers knows, asked of a build worker once: importing transformers
    # here would add about 200 MiB to the server for good.
    if config.get("model_type") not in builder.known_model_types():
        return "remote_code" if config.get("auto_map") else "unknown_type"
    if config.get("quantization_config"):
        return "quantized"
    return None


# -- the sources ----------------------------------------------------------------------------

def _local(name: str, model_class: str, trust_remote_code: bool) -> Model:
    config, path = read_config_file(name)
    config = without_runtime_keys(config)
    check_config(config)
    if trust_remote_code:  # the repository's code runs in a build worker, within its limits
        summary, spec = builder.count(json.dumps(config, sort_keys=True), model_class, trust_remote_code=True,
                                      source_dir=str(path.parent))
    else:
        summary, spec = _counted(json.dumps(config, sort_keys=True), model_class)
    return Model(str(path), "local", summary, spec, traits_from_config(config, summary.model_type),
                 json.dumps(config, sort_keys=True), load_id=str(path.parent))


def _hub_remote(repo: str, model_class: str) -> Model:
    """CLI only: transformers runs the repository's own code to make the config (in a build
    worker, within its limits)."""
    summary, spec = builder.count_hub_remote(check_hub_id(repo), model_class)
    config = without_runtime_keys(fetch_config(repo))
    return Model(repo, "hub", summary, spec, traits_from_config(config, summary.model_type),
                 json.dumps(config, sort_keys=True), load_id=repo)


def _hub(repo: str, model_class: str, read_headers: bool, progress: Progress) -> Model:
    deadline = Deadline()  # one for the whole question: its config, then maybe its headers
    with progress("fetching", repo):
        config, error = _hub_answers.get(("config", _endpoint(), repo), lambda: fetch_config(repo, deadline))
    if error is not None and not (read_headers and error[0] == "hub_no_config"):
        raise CalculatorError(error[0], **error[1])
    config = without_runtime_keys(config) if config is not None else None
    reason = "no_config" if config is None else header_count_reason(config)
    if not read_headers or reason is None:
        return resolve_config(config, repo, source="hub", model_class=model_class, progress=progress, load_id=repo)
    from calculator.models.safetensors import read_headers as read

    with progress("reading_headers", repo):
        stored, header_error = _hub_answers.get(("headers", _endpoint(), repo), lambda: read(repo, deadline))
    if header_error is not None and reason != "quantized":
        if header_error[0] == "no_safetensors":  # say both halves: why headers, and none
            raise CalculatorError(f"{reason}_no_safetensors", repo=repo,
                                  model_type=str((config or {}).get("model_type", ""))[:60])
        raise CalculatorError(header_error[0], **header_error[1])
    if reason == "quantized":  # the config builds the model; the headers say what is stored
        model = resolve_config(config, repo, source="hub", model_class=model_class, progress=progress, load_id=repo)
        return _with_headers(model, stored, reason)
    architectures = (config or {}).get("architectures")
    architecture = str(architectures[0])[:80] if isinstance(architectures, list) and architectures else ""
    model_type = str((config or {}).get("model_type", ""))[:60]
    summary = stored.summary(architecture, model_type)
    return Model(repo, "safetensors", summary, None, traits_from_config(config, model_type),
                 json.dumps(config, sort_keys=True) if config else "", load_id=repo, headers=stored, reason=reason)


def _endpoint() -> str:
    """The Hub asked (HF_ENDPOINT): answers of one Hub are not answers of another."""
    import os

    return os.environ.get("HF_ENDPOINT", "")


def _with_headers(model: Model, headers, reason: str) -> Model:
    from dataclasses import replace

    return replace(model, headers=headers, reason=reason)


def _quiet_progress(step: str, name: str) -> AbstractContextManager:
    return nullcontext()


# -- caches ---------------------------------------------------------------------------------

def _count_outcome(config_json: str, model_class: str):
    """A config counted on the meta device in a build worker, or the error it gave (kept
    too, so a page rerun does not build a bad config again; a config past the build limits is
    kept as refused). The one place a model is built from a config."""
    return _counts.get((config_json, model_class), lambda: builder.count(config_json, model_class))


def _counted(config_json: str, model_class: str) -> tuple[ModelSummary, ArchSpec]:
    value, error = _count_outcome(config_json, model_class)
    if error is not None:
        raise CalculatorError(error[0], **error[1])
    return value


# Errors that say nothing lasting about what was asked: raised, never kept, asked again.
_PASSING = frozenset(builder.PASSING_ERRORS)
# Errors of a Hub that does not answer: kept HUB_FAILURE_SECONDS, not as long as answers.
HUB_FAILURES = frozenset({"hub_unreachable", "hub_too_slow"})


def _outcome(work):
    """(value, None) or (None, (code, params)). A busy build pool is raised, not kept: the
    next question asks again."""
    try:
        return work(), None
    except CalculatorError as error:
        if error.code in _PASSING:
            raise
        return None, (error.code, error.params)


def _seconds_kept(answer, seconds: float | None) -> float | None:
    error = answer[1]
    if error is not None and error[0] in HUB_FAILURES:
        return HUB_FAILURE_SECONDS if seconds is None else min(seconds, HUB_FAILURE_SECONDS)
    return seconds


def _size_of(key, answer) -> int:
    """Bytes an entry holds, roughly: its key's text and its answer pickled."""
    texts = key if isinstance(key, tuple) else (key,)
    size = sum(len(t) for t in texts if isinstance(t, str))
    try:
        return size + len(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # an answer that cannot be pickled is counted at its key's size
        return size + 1024


class _BoundedCache:
    """Answers kept at most `seconds` long (None: until pushed out), at most `entries` of them
    and `max_bytes` in all; the least recently used go first. Two readers asking the same
    question at once share one piece of work; the lock guards the table only, so slow work
    never makes other readers wait for their own (cached or not) answers."""

    def __init__(self, entries: int, max_bytes: int, seconds: float | None = None) -> None:
        self.entries, self.max_bytes, self.seconds = entries, max_bytes, seconds
        self._table: OrderedDict = OrderedDict()  # key -> (time, answer, size, seconds kept)
        self._pending: dict = {}  # key -> Event, while its work runs
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key, work):
        while True:
            with self._lock:
                kept = self._table.get(key)
                if kept is not None and (kept[3] is None or time.monotonic() - kept[0] < kept[3]):
                    self._table.move_to_end(key)
                    return kept[1]
                running = self._pending.get(key)
                if running is None:
                    self._pending[key] = threading.Event()
                    break
            running.wait()  # the same question is being answered: take its answer
        try:
            answer = _outcome(work)
        finally:
            with self._lock:
                self._pending.pop(key).set()
        size = _size_of(key, answer)
        with self._lock:
            self._drop(key)
            if size <= self.max_bytes:
                self._table[key] = (time.monotonic(), answer, size, _seconds_kept(answer, self.seconds))
                self._bytes += size
            while self._table and (len(self._table) > self.entries or self._bytes > self.max_bytes):
                self._drop(next(iter(self._table)))
        return answer

    def _drop(self, key) -> None:
        kept = self._table.pop(key, None)
        if kept is not None:
            self._bytes -= kept[2]

    def stats(self) -> tuple[int, int]:
        """(entries, bytes) held now."""
        with self._lock:
            return len(self._table), self._bytes

    def clear(self) -> None:
        with self._lock:
            self._table.clear()
            self._bytes = 0


_counts = _BoundedCache(COUNT_CACHE_ENTRIES, COUNT_CACHE_BYTES)
_hub_answers = _BoundedCache(HUB_CACHE_ENTRIES, HUB_CACHE_BYTES, seconds=HUB_CACHE_SECONDS)


def cache_stats() -> dict[str, tuple[int, int]]:
    """Entries and bytes held by the model seam's caches (the load benchmark reports them)."""
    return {"counts": _counts.stats(), "hub": _hub_answers.stats()}


def clear_caches() -> None:
    """Forget every count and Hub answer (tests, and a server that wants its memory back)."""
    _counts.clear()
    catalog_model.cache_clear()
    _hub_answers.clear()
