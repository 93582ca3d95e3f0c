"""Bytes per parameter for each storage precision, and the guide's rule of thumb."""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
import math

from calculator.core.errors import CalculatorError

# Storage size of one parameter. int4 packs two weights in a byte: kept exact as a fraction.
BYTES_PER_PARAM: dict[str, Fraction] = {
    "float32": Fraction(4),
    "float16": Fraction(2),
    "bfloat16": Fraction(2),
    "float8": Fraction(1),
    "int8": Fraction(1),
    "int4": Fraction(1, 2),
}
DTYPES: tuple[str, ...] = tuple(BYTES_PER_PARAM)
DEFAULT_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "int8", "int4")

# Floating storage formats that a model's own dtype can take (buffers follow them).
FLOAT_DTYPES = ("float32", "float16", "bfloat16")

_ALIASES = {
    "fp32": "float32", "float": "float32", "f32": "float32",
    "fp16": "float16", "half": "float16", "f16": "float16",
    "bf16": "bfloat16",
    "fp8": "float8", "float8_e4m3fn": "float8", "float8_e5m2": "float8", "e4m3": "float8",
    "i8": "int8", "i4": "int4", "nf4": "int4", "fp4": "int4",
}

# The guide's safety margin for inference: batches, buffers and framework overhead.
RULE_OF_THUMB_MARGIN = Fraction(11, 10)


def normalize_dtype(name: object) -> str:
    """Canonical dtype name for user input such as 'bf16' or 'torch.float16'."""
    if not isinstance(name, str):
        raise CalculatorError("unknown_dtype", dtype=str(name)[:40], choices=", ".join(DTYPES))
    return _normalized(name)


# The engine asks ~17,000 times a rerun of the oom chapter (every step the sort-by-length
# simulation prices); the names come from a few spellings, and a refused one is not kept.
@lru_cache(maxsize=256)
def _normalized(name: str) -> str:
    key = name.strip().lower().removeprefix("torch.")
    key = _ALIASES.get(key, key)
    if key not in BYTES_PER_PARAM:
        raise CalculatorError("unknown_dtype", dtype=name[:40], choices=", ".join(DTYPES))
    return key


def bytes_per_param(dtype: str) -> Fraction:
    return BYTES_PER_PARAM[normalize_dtype(dtype)]


def parameter_bytes(parameters: int, dtype: str) -> int:
    """Bytes to store `parameters` weights in `dtype` (rounded up to whole bytes)."""
    _check_count(parameters)
    return math.ceil(parameters * bytes_per_param(dtype))


def rule_of_thumb_bytes(parameters: int, dtype: str) -> int:
    """The guide's rule: parameters x bytes per parameter x 1.1, in bytes (rounded up)."""
    _check_count(parameters)
    return math.ceil(parameters * bytes_per_param(dtype) * RULE_OF_THUMB_MARGIN)


def _check_count(parameters: object) -> None:
    if isinstance(parameters, bool) or not isinstance(parameters, int) or parameters <= 0:
        raise CalculatorError("bad_parameter_count", value=str(parameters)[:40])
