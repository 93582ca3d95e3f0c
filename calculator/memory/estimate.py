"""`estimate`: memory to load a model, per precision, next to accelerate's own figures."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
import math

from calculator.core.budget import Budget, Readings, reserved_bytes, rounding_bytes
from calculator.models.seam import Model, resolve
from calculator.core.errors import CalculatorError
from calculator.core.precision import DEFAULT_DTYPES, DTYPES, RULE_OF_THUMB_MARGIN, bytes_per_param, normalize_dtype, \
    rule_of_thumb_bytes
from calculator.models.architecture import ArchSpec
from calculator.models.summary import ModelSummary


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
class Shipped:
    """The checkpoint's own stored layout, when its config names a quantization format."""

    format: str
    total_bytes: int
    quantized_parameters: int


@dataclass(frozen=True)
class Estimate:
    model: str
    source: str
    summary: ModelSummary
    rows: tuple[Row, ...]
    shipped: Shipped | None = None

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
            "shipped": self.shipped.__dict__ if self.shipped else None,
        }


FITS, TIGHT, TOO_BIG = "fits", "tight", "too_big"


def fit_verdict(exact_bytes: int, rule_bytes: int, budget: Budget, rounding: int = 0) -> str:
    """Loading a model on a card. fits: the x1.1 rule, as the caching allocator reserves it,
    stays below the usable memory less the headroom; tight: the bare weights fit in the usable
    memory, but not with the rule's 10% and the headroom; too_big: the weights alone exceed it."""
    if reserved_bytes(rule_bytes, rule_bytes, rounding) <= budget.limit_bytes:
        return FITS
    if reserved_bytes(exact_bytes, exact_bytes, rounding) <= budget.usable_bytes:
        return TIGHT
    return TOO_BIG


def precision_key(name: object) -> str:
    """A storage dtype (normalized: bf16 -> bfloat16) or a quantization format key (mxfp4,
    nvfp4, Q4_K...); anything else is refused with both lists."""
    from calculator.memory.quantization import FORMAT_KEYS, is_format, quant_format

    if is_format(name):
        return quant_format(name).key
    try:
        return normalize_dtype(name)
    except CalculatorError:
        formats = [k for k in FORMAT_KEYS if is_format(k)]
        raise CalculatorError("unknown_dtype", dtype=str(name)[:40], choices=", ".join([*DTYPES, *formats])) from None


def loaded_bytes(summary: ModelSummary, dtype: str, spec: ArchSpec | None = None) -> int:
    """The loaded weights: every parameter at the dtype's size, or the format's real layout."""
    from calculator.memory.format_layers import format_total_bytes
    from calculator.memory.quantization import is_format

    return format_total_bytes(summary, spec, dtype) if is_format(dtype) else summary.total_bytes_at(dtype)


def load_readings(summary: ModelSummary, dtype: str, budget: Budget | None = None,
                  spec: ArchSpec | None = None) -> Readings:
    """The memory of the loaded weights read three ways (nothing comes and goes yet). A
    quantization format needs the model's shapes (`spec`)."""
    from calculator.core.budget import readings_of

    return readings_of(_Loaded(loaded_bytes(summary, dtype, spec), weight_rounding(summary, dtype, spec)), budget)


def weight_rounding(summary: ModelSummary, dtype: str, spec: ArchSpec | None = None) -> int:
    """The caching allocator's rounding of every weight matrix, each loaded as its own tensor."""
    from calculator.memory.format_layers import format_weight_rounding
    from calculator.memory.quantization import is_format

    if is_format(dtype):
        return format_weight_rounding(summary, spec, dtype)
    size = bytes_per_param(dtype)
    return sum(m.count * rounding_bytes([math.ceil(m.in_features * m.out_features * size)]) for m in summary.linears)


@dataclass(frozen=True)
class _Loaded:
    total_bytes: int
    rounding_bytes: int

    @property
    def steady_bytes(self) -> int:
        return self.total_bytes


def accelerate_training_bytes(float32_total: int, dtype: str) -> int | None:
    """'Training using Adam' as accelerate estimate-memory reports it (batch size 1): the
    largest of weights, gradients, optimizer states and step, from the float32 size. It has no
    figure for int8/int4 training."""
    if dtype == "float32":
        return 4 * float32_total  # the optimizer step holds 4 copies
    if dtype in ("float16", "bfloat16", "float8"):
        return 2 * float32_total  # mixed precision: the Adam states dominate
    return None


def rows_for(summary: ModelSummary, dtypes=DEFAULT_DTYPES, spec: ArchSpec | None = None) -> tuple[Row, ...]:
    """One row per precision: a dtype (every parameter at its size) or a quantization format
    (its real layout on the model's matrices, which needs `spec`)."""
    from calculator.memory.quantization import is_format

    float32_total = summary.total_bytes_at("float32")
    rows = []
    for dtype in dict.fromkeys(precision_key(d) for d in dtypes):
        if is_format(dtype):
            rows.append(format_row(summary, spec, dtype))
            continue
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


def rule_of_thumb_figures(parameters: int, size: float) -> tuple[int, int]:
    """(weights, weights x 1.1) in bytes for `parameters` at `size` bytes each: a dtype's size,
    or a format's average over a model (format_row's bytes_per_param, its scales included)."""
    if not isinstance(parameters, int) or parameters < 1 or not size > 0:
        raise CalculatorError("bad_size", name="parameters", value=str(parameters)[:30], high=10**13)
    size = Fraction(size)  # exact: 7e9 x 2 x 1.1 is 15.4e9 bytes, not one more
    return math.ceil(parameters * size), math.ceil(parameters * size * RULE_OF_THUMB_MARGIN)


def format_row(summary: ModelSummary, spec: ArchSpec | None, key: str) -> Row:
    """A quantization format's row: its total and largest layer from the real layout (scales
    included; on a mixture of experts, MXFP4 covers the experts only), its bytes per parameter
    the average over every parameter, the rule of thumb that total x 1.1; accelerate has no
    training figure for it."""
    from calculator.memory.format_layers import format_total_bytes, largest_unit_in_format

    total = format_total_bytes(summary, spec, key)
    largest = largest_unit_in_format(summary, spec, key)
    return Row(dtype=key, bytes_per_param=total / summary.parameters, total_bytes=total,
               largest_layer=largest.name if largest else "", largest_layer_bytes=largest.bytes if largest else 0,
               training_adam_bytes=None, rule_of_thumb_bytes=math.ceil(total * RULE_OF_THUMB_MARGIN))


def estimate(name: str, dtypes=DEFAULT_DTYPES, model_class: str = "auto", allow_local: bool = True,
             trust_remote_code: bool = False) -> Estimate:
    """The per-precision table of a model named as the CLI names it."""
    return estimate_model(resolve(name, model_class, allow_local=allow_local, trust_remote_code=trust_remote_code),
                          dtypes)


def estimate_model(model: Model, dtypes=DEFAULT_DTYPES) -> Estimate:
    return Estimate(model.name, model.source, model.summary, rows_for(model.summary, dtypes, model.spec),
                    shipped_weights(model))


def shipped_weights(model: Model) -> Shipped | None:
    """The weights as the checkpoint stores them (gpt-oss: experts in MXFP4; DeepSeek-V3:
    float8 in 128x128 blocks), priced matrix by matrix; None for a plain-dtype checkpoint."""
    from calculator.memory.quantization import quantize_model, shipped_format

    fmt = shipped_format(model.config)
    if fmt is None or model.spec is None or not model.summary.linears:
        return None
    quantized = quantize_model(model.summary, model.spec, fmt)
    return Shipped(fmt, quantized.total_bytes, quantized.quantized_parameters)
