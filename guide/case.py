"""The chapter's case: one model, GPU, precision, batch and lengths that every calculator of a
page starts from (DESIGN.md, "The case").

The case travels in the URL under short stable names (CASE_PARAMS): `model` (a catalog name
or a Hub id), `gpu` (the CLI's GPU key; common spellings are read too), `dtype`, `batch`,
`prompt`, `new_tokens`, `sequence`, for fine-tuning `method`, `precision`, `optimizer` and
`checkpointing`, and for serving `users`, `context` and `tensor`. This module reads them, says when a value cannot be used (and uses the
chapter's default instead), and resolves the model through the model seam. The URL is the
source of truth: the bar's inputs mirror it and write back to it when the reader changes them,
so a shared link reproduces the case. Pure reading and checking here; case_bar.py draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
import math

from calculator.models import catalog
from calculator.core.errors import CalculatorError
from calculator.core.gpus import Gpu, gpu, gpus
from calculator.core.limits import high
from calculator.models.seam import Model
from calculator.core.precision import DTYPES, normalize_dtype
from calculator.memory.quantization import is_format
from calculator.training import CHECKPOINTING, METHODS, OPTIMIZERS, PRECISIONS
from calculator.memory.workloads import WORKLOADS, workload_for

# Every name the case may take in a URL, in the order the bar shows them.
CASE_PARAMS = ("model", "gpu", "dtype", "batch", "prompt", "new_tokens", "sequence", "method", "precision",
               "optimizer", "checkpointing", "users", "context", "tensor", "workload", "items")
# The engine's own bounds (calculator/core/limits.py): the case bar, the overrides and the CLI refuse the
# same values. users, context, tensor: the serving chapter's question (sequences served at once,
# tokens per sequence with prompt and answer, tensor-parallel size; the engine refuses a size that does
# not divide the model's heads).
WHOLE_NUMBERS = {name: high(name) for name in ("batch", "prompt", "new_tokens", "sequence", "users", "context",
                                               "tensor", "items")}
STEPS = {"batch": 1, "users": 1, "tensor": 1, "items": 1000}  # the case bar's step for a whole number (others: 128)
# workload "auto": the one the model's architecture implies (calculator/memory/workloads.py)
CHOICES = {"method": METHODS, "precision": PRECISIONS, "optimizer": OPTIMIZERS, "checkpointing": CHECKPOINTING,
           "workload": ("auto", *WORKLOADS)}
MAX_DIGITS = 9  # a whole number in a link: 999,999,999 at most (Streamlit's widgets take 53 bits)
MAX_MODEL_NAME = 200


@dataclass(frozen=True)
class Case:
    """What the reader set for this chapter (raw values, before the model is resolved)."""

    model: str = "llama-3-8b"
    gpu: str = "rtx4090"
    dtype: str = "bfloat16"
    batch: int = 1
    prompt: int = 1024
    new_tokens: int = 256
    sequence: int = 2048
    method: str = "lora"
    precision: str = "mixed"
    optimizer: str = "adamw"
    checkpointing: str = "full"
    users: int = 1
    context: int = 4096
    tensor: int = 1
    workload: str = "auto"
    items: int = 100_000
    # not a URL name: with no `dtype` in the URL, the precision the serving engine loads the
    # checkpoint in (gpt-oss: mxfp4), as `serve` without --dtype (serving_dtype below)
    dtype_as_shipped: bool = False

    def value(self, name: str):
        return getattr(self, name)

    @property
    def card(self) -> Gpu:
        return gpu(self.gpu)


@dataclass(frozen=True)
class Refused:
    """A URL value the case could not use, shown to the reader in their language."""

    param: str
    value: str
    code: str = "bad_url_value"


@dataclass(frozen=True)
class ResolvedCase:
    """The case with its model counted, ready for the calculators."""

    case: Case
    model: Model  # always one the calculators can run (the chapter's default stands in when needed)
    card: Gpu
    refused: tuple[Refused, ...] = ()
    model_error: CalculatorError | None = None  # the reader's model could not be read: the default stands in
    upload_name: str = ""  # an uploaded config.json is the model (it cannot travel in a link)
    present: tuple[str, ...] = field(default_factory=tuple)  # the case names the URL sets
    headers_model: Model | None = None  # a checkpoint only its safetensors headers could count
    fields: tuple[str, ...] = ()  # the case names the chapter's bar shows
    dtype_source: str = "given"  # "given" (the URL), "as_shipped", "shipped_not_run" or "default": serving_dtype

    def __getattr__(self, name):  # case values read as attributes: resolved.batch, resolved.dtype
        if name in CASE_PARAMS and name not in ("model", "gpu"):
            return getattr(self.case, name)
        raise AttributeError(name)

    @property
    def work(self) -> str:
        """The workload the calculators run: the one asked when the model runs it, else the
        model's own (a case set for a decoder keeps working when the reader picks Whisper)."""
        return workload_for(self.model.spec, None if self.case.workload == "auto" else self.case.workload)


def read_case(query: dict[str, list[str]], defaults: Case) -> tuple[Case, tuple[Refused, ...], tuple[str, ...]]:
    """The case a URL sets, over the chapter's defaults. A value that cannot be used is refused
    (the default stands) and reported; a repeated name takes its last value."""
    values: dict[str, object] = {}
    refused: list[Refused] = []
    present = []
    for name in CASE_PARAMS:
        raw = query.get(name) or []
        if not raw:
            continue
        present.append(name)
        text = str(raw[-1]).strip()
        try:
            values[name] = parse_value(name, text)
        except ValueError:
            refused.append(Refused(name, text[:60]))
    if "method" in values and "checkpointing" not in values:  # the method's own start, as the CLI's
        from calculator.answers.verdicts import default_checkpointing

        values["checkpointing"] = default_checkpointing(values["method"])
    return replace(defaults, **values), tuple(refused), tuple(present)


def serving_dtype(case: Case, present: tuple[str, ...], model: Model, card: Gpu) -> tuple[Case, str]:
    """The case with its precision and where it came from: the URL's when it names one ("given");
    otherwise, on a chapter whose case is the engine's, the engine's own choice with no --dtype
    (calculator.serving.weights.default_weights on vLLM, the chapter's default engine), so the
    bar, every calculator, `serve` and a copied link name one precision."""
    if "dtype" in present:
        return case, "given"
    if not case.dtype_as_shipped or model.spec is None:
        return case, "default"
    from calculator.serving.weights import default_weights

    dtype, source = default_weights(model, card, "vllm")
    return replace(case, dtype=dtype), source


def parse_value(name: str, text: str):
    """One case value from its URL text, or ValueError when it cannot be used."""
    if name in WHOLE_NUMBERS:
        return whole_number(text, WHOLE_NUMBERS[name])
    if name == "model":
        if not text or len(text) > MAX_MODEL_NAME or not text.isprintable():
            raise ValueError(name)
        entry = catalog.find(text)
        return entry.key if entry else text
    if name == "gpu":
        try:
            return gpu(text).key
        except CalculatorError:
            raise ValueError(name) from None
    if name == "dtype":
        if is_format(text):
            return text.strip().lower()
        try:
            return normalize_dtype(text)
        except CalculatorError:
            raise ValueError(name) from None
    if text in CHOICES[name]:
        return text
    raise ValueError(name)


def whole_number(text: str, high: int) -> int:
    """A positive whole number of at most MAX_DIGITS digits and at most `high`: no inf, no NaN,
    no 1e309, no 400-digit integers (they would reach Streamlit's widgets)."""
    digits = text.strip()
    if digits.endswith(".0"):
        digits = digits[:-2]
    if not digits.isdigit() or len(digits) > MAX_DIGITS:
        raise ValueError(text)
    value = int(digits)
    if not 1 <= value <= high or not math.isfinite(value):
        raise ValueError(text)
    return value


def url_text(name: str, value) -> str:
    """How a case value is written in a URL: catalog names and GPU keys as they are."""
    return str(value)


def pinned_pairs(resolved: ResolvedCase | None, query: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The case as a link a reader copies writes it: every value of the chapter's case
    explicitly, defaults included (the workload as the calculators run it), so the link means
    the same when a default changes; then the other case names the URL carries, as they are."""
    pinned = []
    fields = resolved.fields if resolved is not None else ()
    for name in CASE_PARAMS:
        if name in fields:
            value = resolved.work if name == "workload" else resolved.case.value(name)
            pinned.append((name, url_text(name, value)))
        else:
            pinned += [(name, str(value)) for value in query.get(name) or []]
    return pinned


def gpu_keys() -> list[str]:
    return list(gpus())


def dtype_choices() -> list[str]:
    """Storage precisions and the real quantization formats a page can price."""
    from calculator.memory.quantization import FORMAT_KEYS

    return list(DTYPES) + [f for f in FORMAT_KEYS if is_format(f)]
