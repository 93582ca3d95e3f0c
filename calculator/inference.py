"""Memory of inference: weights, KV cache and the activation peak of a forward pass.

All sizes in bytes. The model's shape comes from an ArchSpec (architecture.py), the weights
from the exact meta-device count (summary.py), the activation peak from the moments of the
forward that transformers 5 allocates (activations.py, checked on the CPU by
bench/activations.py). The total is what torch.cuda.max_memory_allocated() would report for
the run: weights + cache + activation peak; the CUDA context, kernel workspaces and the
caching allocator's reserve come on top (see the oom chapter).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import math

from .activations import Phase, forward_phases
from .architecture import ArchSpec
from .errors import CalculatorError
from .precision import FLOAT_DTYPES, bytes_per_param, normalize_dtype
from .search import largest_fitting  # noqa: F401 (also imported from here)
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
    attention_used: str = ""  # what transformers runs: eager for models without an SDPA path
    peak_moment: str = ""  # where in the forward the peak comes (activations.Phase.name)

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


def check_choices(attention: str, mode: str) -> None:
    if attention not in ATTENTION:
        raise CalculatorError("unknown_choice", name="attention", value=str(attention)[:30], choices=", ".join(ATTENTION))
    if mode not in MODES:
        raise CalculatorError("unknown_choice", name="mode", value=str(mode)[:30], choices=", ".join(MODES))


def peak_phase(spec: ArchSpec, batch: int, tokens: int, dtype: str = "bfloat16", attention: str = "sdpa",
               mode: str = "generate", kv_dtype: str | None = None, decoder_tokens: int | None = None) -> Phase:
    """The moment of the forward that holds the most memory beyond the weights (activations.py).
    decoder_tokens: an encoder-decoder's decoder length, if not as long as its input."""
    check_choices(attention, mode)
    a = int(bytes_per_param(compute_dtype(dtype)))
    kv = float(bytes_per_param(kv_dtype_for(dtype, kv_dtype)))
    phases = forward_phases(spec, batch, tokens, a, kv, attention, mode, decoder_tokens)
    return max(phases, key=lambda p: p.total_bytes)


def activation_peak_bytes(spec: ArchSpec, batch: int, tokens: int, dtype: str = "bfloat16",
                          attention: str = "sdpa", mode: str = "generate", kv_dtype: str | None = None) -> int:
    """Largest memory a forward over `tokens` positions holds beyond the weights and the
    finished cache: the peak moment's live tensors, plus the cache storage it holds beyond
    what the cache keeps in the end (the prompt's keys and values of sliding-window layers)."""
    return _activation(spec, batch, tokens, dtype, attention, mode, kv_dtype)[0]


def _activation(spec, batch, tokens, dtype, attention, mode, kv_dtype) -> tuple[int, Phase]:
    phase = peak_phase(spec, batch, tokens, dtype, attention, mode, kv_dtype)
    cache = kv_cache_bytes(spec, batch, tokens, kv_dtype_for(dtype, kv_dtype))
    return max(phase.total_bytes - cache, 0), phase


def inference_memory(summary: ModelSummary, spec: ArchSpec, batch: int, context: int,
                     dtype: str = "bfloat16", kv_dtype: str | None = None, attention: str = "sdpa",
                     mode: str = "generate", kv_layout: str = "transformers") -> InferenceMemory:
    """Peak memory of running `batch` sequences of `context` tokens: the weights, the cache
    holding every token, and the activation peak of the forward over the whole prompt (the
    worst case: a prompt as long as the whole context)."""
    batch, context = check_sizes(batch, context)
    dtype = normalize_dtype(dtype)
    cache_dtype = kv_dtype_for(dtype, kv_dtype)
    weights = summary.total_bytes_at(dtype)
    kv = kv_cache_bytes(spec, batch, context, cache_dtype, layout=kv_layout)
    activations, phase = _activation(spec, batch, context, dtype, attention, mode, cache_dtype)
    return InferenceMemory(weights, kv, activations, weights + kv + activations, batch, context,
                           dtype, cache_dtype, attention, mode, attention if spec.sdpa else "eager", phase.name)


def largest_batch(summary, spec, capacity: int, context: int, **options) -> int:
    return largest_fitting(capacity, lambda b: inference_memory(summary, spec, b, context, **options).total_bytes, MAX_BATCH)


def largest_context(summary, spec, capacity: int, batch: int, limit: int | None = None, **options) -> int:
    high = limit or spec.max_positions or MAX_TOKENS
    return largest_fitting(capacity, lambda t: inference_memory(summary, spec, batch, t, **options).total_bytes, high)
