"""`estimate`: memory to load a model, per precision, next to accelerate's own figures."""

from __future__ import annotations

from dataclasses import dataclass

from .model import Model, resolve
from .precision import DEFAULT_DTYPES, bytes_per_param, normalize_dtype, rule_of_thumb_bytes
from .summary import ModelSummary


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


def estimate(name: str, dtypes=DEFAULT_DTYPES, model_class: str = "auto", allow_local: bool = True,
             trust_remote_code: bool = False) -> Estimate:
    """The per-precision table of a model named as the CLI names it."""
    return estimate_model(resolve(name, model_class, allow_local=allow_local, trust_remote_code=trust_remote_code),
                          dtypes)


def estimate_model(model: Model, dtypes=DEFAULT_DTYPES) -> Estimate:
    return Estimate(model.name, model.source, model.summary, rows_for(model.summary, dtypes))
