"""An out-of-memory message read against a case (model, precision, batch, tokens): what the
allocated figure is made of, and which of the case's tensors is the size of the failed request.

The allocated figure is split into the case's weights and KV cache (calculator.memory.inference) and
what remains: activations and anything else alive. The request is compared with the tensors a
transformer allocates in one piece, each written as its shape so a reader can check it:

- logits: batch × tokens × vocabulary, in the compute dtype, and in float32 (transformers
  upcasts them for the loss and for sampling: `logits.float()`);
- the attention scores of one layer under eager attention: batch × heads × tokens × tokens, in
  the compute dtype and in float32 (eager softmax runs in float32);
- one MLP projection's output: batch × tokens × intermediate width;
- one layer's keys (or values) of the cache: batch × KV heads × tokens × head dim, reallocated
  as the dynamic cache grows (torch.cat);
- the embedding matrix (vocabulary × hidden) in the weights' dtype, and one Adam moment of it
  in float32 (optimizer states are created at the first step).

The request in a message is the allocator's rounded size (2 MiB multiples above 10 MiB) printed
with two decimals (at most 0.005 GiB, 5.12 MiB, off): a tensor "matches" when it lies within
MATCH_SLACK of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from calculator.models.architecture import ArchSpec
from calculator.memory.inference import compute_dtype, inference_memory, kv_dtype_for
from calculator.memory.oom_message import OomReport
from calculator.core.precision import bytes_per_param
from calculator.models.summary import ModelSummary

MATCH_SLACK = 8 * 2**20  # 2 MiB of rounding plus 5.12 MiB of printing


@dataclass(frozen=True)
class Tensor:
    """One tensor of the case: `code` names it in the UI catalog (oom_case.tensor_<code>)."""

    code: str
    shape: tuple[int, ...]
    dtype: str
    bytes: int


@dataclass(frozen=True)
class CaseReading:
    """The message's allocated figure against the case, and the tensors nearest the request."""

    allocated_bytes: int
    weights_bytes: int
    kv_cache_bytes: int
    activation_peak_bytes: int  # the case's own prediction, for comparison with `rest_bytes`
    rest_bytes: int  # allocated − weights − KV cache; negative: the message's run held less than the case
    requested_bytes: int
    matches: tuple[Tensor, ...]  # within MATCH_SLACK of the request, nearest first
    nearest: Tensor | None  # the nearest tensor, matching or not

    def to_json(self) -> dict:
        tensor = lambda t: {"tensor": t.code, "shape": list(t.shape), "dtype": t.dtype, "bytes": t.bytes}  # noqa: E731
        return {"allocated_bytes": self.allocated_bytes, "weights_bytes": self.weights_bytes,
                "kv_cache_bytes": self.kv_cache_bytes, "activation_peak_bytes": self.activation_peak_bytes,
                "rest_bytes": self.rest_bytes, "matches": [tensor(t) for t in self.matches],
                "nearest": tensor(self.nearest) if self.nearest else None}


def _size(shape: tuple[int, ...], element: float) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return round(count * element)


def case_tensors(spec: ArchSpec, batch: int, tokens: int, dtype: str, kv_dtype: str | None = None) -> tuple[Tensor, ...]:
    """The tensors listed in the module's docstring, for this case."""
    act = compute_dtype(dtype)
    cache = kv_dtype_for(dtype, kv_dtype)
    weight = act if not _is_plain(dtype) else dtype
    rows = []
    if spec.vocab and spec.head == "lm":
        rows += [("logits_float32", (batch, tokens, spec.vocab), "float32"), ("logits", (batch, tokens, spec.vocab), act)]
    if spec.heads:
        scores = (batch, spec.heads, tokens, tokens)
        rows += [("attention_scores_float32", scores, "float32"), ("attention_scores", scores, act)]
    if spec.intermediate:
        rows.append(("mlp", (batch, tokens, spec.intermediate), act))
    if spec.has_kv_cache and spec.kv_heads and spec.head_dim:
        rows.append(("kv_layer", (batch, spec.kv_heads, tokens, spec.head_dim), cache))
    if spec.vocab and spec.hidden:
        rows += [("embedding", (spec.vocab, spec.hidden), weight), ("adam_moment", (spec.vocab, spec.hidden), "float32")]
    return tuple(Tensor(code, shape, kind, _size(shape, float(bytes_per_param(kind))))
                 for code, shape, kind in rows)


def _is_plain(dtype: str) -> bool:
    from calculator.memory.quantization import is_format

    return not is_format(dtype)


def matches(requested: int, size: int) -> bool:
    return size >= MATCH_SLACK and abs(requested - size) <= MATCH_SLACK


def read_against_case(report: OomReport, summary: ModelSummary, spec: ArchSpec, batch: int, tokens: int,
                      dtype: str = "bfloat16") -> CaseReading:
    """The message's allocated figure split along the case, and the case's tensors nearest the
    request. Raises CalculatorError on a case the calculator refuses (batch, tokens, dtype)."""
    memory = inference_memory(summary, spec, batch, tokens, dtype=dtype)
    tensors = case_tensors(spec, batch, tokens, dtype)
    by_distance = sorted(tensors, key=lambda t: abs(report.requested - t.bytes))
    found = tuple(t for t in by_distance if matches(report.requested, t.bytes))
    rest = report.allocated - memory.weights_bytes - memory.kv_cache_bytes
    return CaseReading(report.allocated, memory.weights_bytes, memory.kv_cache_bytes, memory.activation_peak_bytes,
                       rest, report.requested, found, by_distance[0] if by_distance else None)


def shape_text(shape: tuple[int, ...], lang: str = "en") -> str:
    from calculator.core.units import format_count

    return " × ".join(format_count(dim, lang) for dim in shape)


def case_lines(reading: CaseReading, lang: str = "en") -> list[str]:
    """The reading in sentences of the UI catalog (oom_case.*), sizes in GiB."""
    from calculator.core.messages import text
    from calculator.core.units import format_bytes

    size = lambda n: format_bytes(n, lang)  # noqa: E731
    held = reading.weights_bytes + reading.kv_cache_bytes
    if reading.rest_bytes >= 0:
        lines = [text("oom_case.split", lang, allocated=size(reading.allocated_bytes), weights=size(reading.weights_bytes),
                      kv=size(reading.kv_cache_bytes), rest=size(reading.rest_bytes),
                      activations=size(reading.activation_peak_bytes))]
    else:
        lines = [text("oom_case.split_less", lang, allocated=size(reading.allocated_bytes), held=size(held),
                      weights=size(reading.weights_bytes), kv=size(reading.kv_cache_bytes))]
    describe = lambda t: dict(tensor=text(f"oom_case.tensor_{t.code}", lang), shape=shape_text(t.shape, lang),  # noqa: E731
                              dtype=t.dtype, size=size(t.bytes), requested=size(reading.requested_bytes))
    if reading.matches:
        lines.append(text("oom_case.match", lang, **describe(reading.matches[0])))
    elif reading.nearest is not None:
        lines.append(text("oom_case.nearest", lang, **describe(reading.nearest)))
    return lines
