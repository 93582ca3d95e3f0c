"""Memory of inference: weights, KV cache and the activation peak of a forward pass.

All sizes in bytes. The model's shape comes from an ArchSpec (architecture.py), the weights
from the exact meta-device count (summary.py). The activation model follows what
transformers allocates during a forward without gradients: the residual stream, the largest
layer-local temporaries (attention scores when attention is eager, the MLP expansion), and
the logits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import math

from .architecture import ArchSpec
from .errors import CalculatorError
from .precision import FLOAT_DTYPES, bytes_per_param, normalize_dtype
from .summary import ModelSummary

ATTENTION = ("sdpa", "eager")
MODES = ("generate", "loglikelihood")
KV_LAYOUTS = ("transformers", "expanded")
MAX_TOKENS = 10**8  # far beyond any context window: protects the arithmetic, not the user
MAX_BATCH = 10**6


@dataclass(frozen=True)
class InferenceMemory:
    weights_bytes: int
    kv_cache_bytes: int
    activation_peak_bytes: int
    total_bytes: int
    batch: int
    context: int
    dtype: str
    kv_dtype: str
    attention: str
    mode: str

    def to_json(self) -> dict:
        return asdict(self)


def compute_dtype(dtype: str) -> str:
    """The dtype activations are computed in: quantized weights compute in 16 bits."""
    dtype = normalize_dtype(dtype)
    return dtype if dtype in FLOAT_DTYPES else "bfloat16"


def kv_dtype_for(dtype: str, kv_dtype: str | None) -> str:
    """The cache's dtype: its own when given (fp8/int8 caches), else the compute dtype."""
    return normalize_dtype(kv_dtype) if kv_dtype not in (None, "", "auto") else compute_dtype(dtype)


def check_sizes(batch: object, context: object) -> tuple[int, int]:
    for name, value, high in (("batch", batch, MAX_BATCH), ("context", context, MAX_TOKENS)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise CalculatorError("bad_size", name=name, value=str(value)[:30], high=high)
    return batch, context


def kv_cache_bytes(spec: ArchSpec, batch: int, tokens: int, kv_dtype: str = "bfloat16",
                   encoder_tokens: int | None = None, layout: str = "transformers") -> int:
    """2 x layers x key/value heads x head size x tokens x batch x bytes, per attention group:
    grouped/multi-query heads, sliding windows capping the tokens kept, cross-attention over
    the encoder's tokens, and latent attention (MLA), which transformers stores as the
    compressed latent; layout="expanded" gives what per-head keys and values would take."""
    if not spec.has_kv_cache:
        return 0
    size = bytes_per_param(kv_dtype)
    encoder_tokens = tokens if encoder_tokens is None else encoder_tokens
    if layout == "expanded" and spec.mla_expanded_dim:
        layers = sum(g.layers for g in spec.attention if not g.cross)
        return math.ceil(layers * batch * tokens * spec.mla_expanded_dim * size)
    total = 0
    for group in spec.attention:
        kept = group.cache_tokens(tokens, encoder_tokens)
        total += group.layers * batch * kept * group.values_per_token() * size
    return math.ceil(total)


def kv_bytes_per_token(spec: ArchSpec, kv_dtype: str = "bfloat16", layout: str = "transformers") -> int:
    """Cache bytes one more token of one sequence costs, with no window reached yet."""
    return kv_cache_bytes(spec, 1, 1, kv_dtype, encoder_tokens=0, layout=layout)


def activation_peak_bytes(spec: ArchSpec, batch: int, tokens: int, dtype: str = "bfloat16",
                          attention: str = "sdpa", mode: str = "generate") -> int:
    """Largest memory a forward over `tokens` positions holds beyond weights and cache."""
    if attention not in ATTENTION:
        raise CalculatorError("unknown_choice", name="attention", value=str(attention)[:30], choices=", ".join(ATTENTION))
    if mode not in MODES:
        raise CalculatorError("unknown_choice", name="mode", value=str(mode)[:30], choices=", ".join(MODES))
    a = int(bytes_per_param(compute_dtype(dtype)))
    n = batch * tokens  # positions processed at once
    h = spec.hidden
    residual = 2 * n * h * a  # the hidden states and the normalised copy the layer reads
    heads, d = spec.heads, spec.head_dim
    q_and_out = n * heads * d * a * 2
    attention_peak = q_and_out
    if attention == "eager":
        keys = tokens  # eager attention scores every position against every other
        scores = batch * heads * tokens * keys
        # scores in the compute dtype, the float32 softmax, its cast back, and the mask
        attention_peak += scores * (a + 4 + a) + batch * tokens * keys * a
        if spec.kv_heads < heads:  # repeat_kv expands keys and values to every head
            attention_peak += 2 * batch * heads * keys * d * a
    mlp = _mlp_peak(spec, n, a)
    logits = _logits_peak(spec, batch, tokens, a, mode)
    return residual + max(attention_peak, mlp, logits)


def _mlp_peak(spec: ArchSpec, n: int, a: int) -> int:
    if spec.experts:
        # routed tokens meet their experts one expert at a time; on average each of the
        # E experts sees n x k / E of them; shared experts see every token
        routed = math.ceil(n * spec.experts_per_token / spec.experts)
        width = 3 * spec.expert_intermediate
        return max(3 * n * spec.shared_expert_intermediate, routed * width) * a + n * spec.hidden * a + n * spec.experts * a
    width = 3 if spec.gated_mlp else 2
    return width * n * spec.intermediate * a


def _logits_peak(spec: ArchSpec, batch: int, tokens: int, a: int, mode: str) -> int:
    if spec.kind in ("encoder", "vision") or not spec.vocab:
        return 0
    if mode == "generate":
        return batch * spec.vocab * (a + 4)  # the last position only, then its float32 copy
    # every position's logits, their float32 copy and the log-probabilities
    return batch * tokens * spec.vocab * (a + 4 + 4)


def inference_memory(summary: ModelSummary, spec: ArchSpec, batch: int, context: int,
                     dtype: str = "bfloat16", kv_dtype: str | None = None, attention: str = "sdpa",
                     mode: str = "generate", kv_layout: str = "transformers") -> InferenceMemory:
    """Peak memory of running `batch` sequences of `context` tokens: the weights, the cache
    holding every token, and the activation peak of the forward over the whole prompt."""
    batch, context = check_sizes(batch, context)
    dtype = normalize_dtype(dtype)
    cache_dtype = kv_dtype_for(dtype, kv_dtype)
    weights = summary.total_bytes_at(dtype)
    kv = kv_cache_bytes(spec, batch, context, cache_dtype, layout=kv_layout) if mode == "generate" or spec.has_kv_cache else 0
    activations = activation_peak_bytes(spec, batch, context, dtype, attention, mode)
    return InferenceMemory(weights, kv, activations, weights + kv + activations, batch, context,
                           dtype, cache_dtype, attention, mode)


def largest_fitting(capacity: int, total_for, high: int) -> int:
    """The largest n in 1..high with total_for(n) <= capacity (0 if none): total_for grows
    with n, so a binary search."""
    if total_for(1) > capacity:
        return 0
    low, top = 1, high
    while low < top:
        mid = (low + top + 1) // 2
        if total_for(mid) <= capacity:
            low = mid
        else:
            top = mid - 1
    return low


def largest_batch(summary, spec, capacity: int, context: int, **options) -> int:
    return largest_fitting(capacity, lambda b: inference_memory(summary, spec, b, context, **options).total_bytes, MAX_BATCH)


def largest_context(summary, spec, capacity: int, batch: int, limit: int | None = None, **options) -> int:
    high = limit or spec.max_positions or MAX_TOKENS
    return largest_fitting(capacity, lambda t: inference_memory(summary, spec, batch, t, **options).total_bytes, high)
