"""`estimate`: memory to load a model, per precision, next to accelerate's own figures."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
import json
from pathlib import Path

from . import catalog
from .errors import CalculatorError
from .hub import fetch_config, is_hub_id
from .precision import DEFAULT_DTYPES, bytes_per_param, normalize_dtype, rule_of_thumb_bytes
from .architecture import ArchSpec
from .summary import ModelSummary

SOURCES = ("catalog", "local", "hub")


@dataclass(frozen=True)
class Row:
    dtype: str
    bytes_per_param: float
    total_bytes: int
    largest_layer: str
    largest_layer_bytes: int
    training_adam_bytes: int | None
    rule_of_thumb_bytes: int


@dataclass(frozen=True)
class Estimate:
    model: str
    source: str
    summary: ModelSummary
    rows: tuple[Row, ...]

    def to_json(self) -> dict:
        s = self.summary
        return {
            "model": self.model,
            "source": self.source,
            "architecture": s.architecture,
            "model_class": s.model_class,
            "parameters": s.parameters,
            "trainable_parameters": s.trainable_parameters,
            "active_parameters": s.active_parameters,
            "buffers_bytes": s.buffers_bytes,
            "rows": [row.__dict__ for row in self.rows],
        }


FITS, TIGHT, TOO_BIG = "fits", "tight", "too_big"


def fit_verdict(exact_bytes: int, rule_bytes: int, capacity_bytes: int) -> str:
    """fits: the x1.1 rule fits; tight: the bare weights fit but leave under 10% for the
    rest; too_big: the weights alone exceed the memory."""
    if rule_bytes <= capacity_bytes:
        return FITS
    if exact_bytes <= capacity_bytes:
        return TIGHT
    return TOO_BIG


def accelerate_training_bytes(float32_total: int, dtype: str) -> int | None:
    """'Training using Adam' as accelerate estimate-memory reports it (batch size 1): the
    largest of weights, gradients, optimizer states and step, from the float32 size. It has no
    figure for int8/int4 training."""
    if dtype == "float32":
        return 4 * float32_total  # the optimizer step holds 4 copies
    if dtype in ("float16", "bfloat16", "float8"):
        return 2 * float32_total  # mixed precision: the Adam states dominate
    return None


def rows_for(summary: ModelSummary, dtypes=DEFAULT_DTYPES) -> tuple[Row, ...]:
    float32_total = summary.total_bytes_at("float32")
    rows = []
    for dtype in dict.fromkeys(normalize_dtype(d) for d in dtypes):
        largest = summary.largest_unit_at(dtype)
        rows.append(Row(
            dtype=dtype,
            bytes_per_param=float(bytes_per_param(dtype)),
            total_bytes=summary.total_bytes_at(dtype),
            largest_layer=largest.name if largest else "",
            largest_layer_bytes=largest.bytes_at(dtype) if largest else 0,
            training_adam_bytes=accelerate_training_bytes(float32_total, dtype),
            rule_of_thumb_bytes=rule_of_thumb_bytes(summary.parameters, dtype),
        ))
    return tuple(rows)


@lru_cache(maxsize=64)
def _summary_of_json(config_json: str, model_class: str) -> ModelSummary:
    from .meta import count_config

    return count_config(json.loads(config_json), model_class)


def summary_for_config(config: dict, model_class: str = "auto", trust_remote_code: bool = False,
                       source_dir: str | None = None) -> ModelSummary:
    """Exact summary of a config dict, cached by content (a bounded cache)."""
    if trust_remote_code:
        from .meta import count_config

        return count_config(config, model_class, trust_remote_code=True, source_dir=source_dir)
    _check_class(model_class)
    return _summary_of_json(json.dumps(config, sort_keys=True), model_class)


def resolve_source(name: str, allow_local: bool) -> str:
    """Which source a MODEL argument names: an existing path (CLI only), a catalog model, or
    a Hub id. The page passes allow_local=False: it never reads a server path."""
    if not isinstance(name, str) or not name.strip():
        raise CalculatorError("model_not_found", name="")
    name = name.strip()
    if allow_local and Path(name).expanduser().exists():
        return "local"
    if catalog.find(name) is not None:
        return "catalog"
    if is_hub_id(name):
        return "hub"
    raise CalculatorError("model_not_found", name=name[:80])


@dataclass(frozen=True)
class ResolvedModel:
    """A model the user named, counted: where it came from, its summary and its shape."""

    name: str
    source: str
    summary: ModelSummary
    spec: ArchSpec


@lru_cache(maxsize=64)
def _spec_of_json(config_json: str) -> ArchSpec:
    from .architecture import spec_from_config
    from .meta import make_config

    return spec_from_config(make_config(json.loads(config_json)))


def spec_for_config(config: dict) -> ArchSpec:
    return _spec_of_json(json.dumps(config, sort_keys=True))


def resolve_config(config: dict, name: str, model_class: str = "auto", source: str = "local") -> ResolvedModel:
    """A config the user supplied as data (an upload, or a Hub config already fetched):
    never runs remote code."""
    return ResolvedModel(name, source, summary_for_config(config, model_class), spec_for_config(config))


def header_count_reason(config: dict) -> str | None:
    """Why a Hub checkpoint's safetensors headers should be read, given its config:
    "remote_code" (its classes live in the repository, and we never run that code),
    "unknown_type" (this transformers has no class for it), "quantized" (the config builds
    the full-precision model; the headers say what the checkpoint stores). None when the
    config alone gives the count. Absurd configs are refused first."""
    from .configs import check_config
    from .meta import needs_remote_code

    check_config(config)
    if needs_remote_code(config):
        return "remote_code" if config.get("auto_map") else "unknown_type"
    if config.get("quantization_config"):
        return "quantized"
    return None


def resolve_model(name: str, model_class: str = "auto", allow_local: bool = True,
                  trust_remote_code: bool = False) -> ResolvedModel:
    """A catalog name, a local config (CLI only) or a Hub id, counted."""
    _check_class(model_class)
    source = resolve_source(name, allow_local)
    name = name.strip()
    if source == "catalog":
        entry = catalog.find(name)
        return ResolvedModel(entry.id, source, catalog.stored_summary(entry.key, model_class),
                             catalog.stored_spec(entry.key))
    if source == "local":
        from .configs import read_config_file

        config, path = read_config_file(name)
        summary = summary_for_config(config, model_class, trust_remote_code, str(path.parent))
        return ResolvedModel(str(path), source, summary, _local_spec(config, trust_remote_code, path))
    if trust_remote_code:
        from .meta import count_hub_remote

        summary = count_hub_remote(name, model_class)
        return ResolvedModel(name, source, summary, _remote_spec(name))
    config = fetch_config(name)
    return ResolvedModel(name, source, summary_for_config(config, model_class), spec_for_config(config))


def _local_spec(config: dict, trust_remote_code: bool, path: Path) -> ArchSpec:
    if not trust_remote_code:
        return spec_for_config(config)
    from .architecture import spec_from_config
    from .meta import make_config

    return spec_from_config(make_config(config, trust_remote_code=True, source_dir=str(path.parent)))


def _remote_spec(repo_id: str) -> ArchSpec:
    from transformers import AutoConfig

    from .architecture import spec_from_config

    return spec_from_config(AutoConfig.from_pretrained(repo_id, trust_remote_code=True))


def estimate(name: str, dtypes=DEFAULT_DTYPES, model_class: str = "auto", allow_local: bool = True,
             trust_remote_code: bool = False) -> Estimate:
    model = resolve_model(name, model_class, allow_local, trust_remote_code)
    return Estimate(model.name, model.source, model.summary, rows_for(model.summary, dtypes))


def estimate_config(config: dict, name: str, dtypes=DEFAULT_DTYPES, model_class: str = "auto") -> Estimate:
    """For a config the user supplied as data (an upload): never runs remote code."""
    summary = summary_for_config(config, model_class)
    return Estimate(name, "local", summary, rows_for(summary, dtypes))


def _check_class(model_class: str) -> None:
    from .meta import MODEL_CLASSES  # light: meta imports torch lazily

    if model_class not in MODEL_CLASSES:
        raise CalculatorError("unknown_model_class", value=str(model_class)[:40], choices=", ".join(MODEL_CLASSES))
