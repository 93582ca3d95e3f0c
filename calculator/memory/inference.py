"""Memory of inference: weights, KV cache and the activation peak of a forward pass.

All sizes in bytes. The model's shape comes from an ArchSpec (architecture.py), the weights
from the exact meta-device count (summary.py) or, for a quantization format, from its real
layout (quantization.py), the activation peak from the moments of the forward that
transformers 5 allocates (activations.py, checked on the CPU by bench/activations.py). The
total is what torch.cuda.max_memory_allocated() would report; budget.py reads it as
max_memory_reserved and nvidia-smi would, and gives the verdict on a card.

A generation is a prefill of the prompt, then one decoding step per new token: the peak is
the larger of the prefill (the prompt's activations, with the cache of the prompt, or the
whole static cache) and the last decoding step (the cache of every token, with one layer's
keys and values copied by torch.cat as the dynamic cache grows). Models that do not generate
(encoders, classifiers, vision models) run one forward over batch x sequence (mode forward).

cache="legacy" is the tuple cache of older transformers (Llama and Mistral before 4.36, other
families somewhat later, before their move to Cache objects): each attention layer returns
torch.cat(past, new) as a fresh tensor, and generate() keeps the previous step's tuple in its
model_kwargs until the forward returns, so the last step holds two whole caches, one token
apart, instead of one cache and one layer's copy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import math

from calculator.core import limits
from calculator.core.memo import kept_by_inputs
from calculator.memory.activations import Phase, forward_phases
from calculator.models.architecture import ArchSpec, attention_run
from calculator.core.errors import CalculatorError, Grouped
from calculator.core.precision import FLOAT_DTYPES, bytes_per_param, normalize_dtype
from calculator.core.search import largest_fitting  # noqa: F401 (also imported from here)
from calculator.models.summary import ModelSummary
from calculator.memory.workloads import can_generate, is_speech

ATTENTION = ("sdpa", "eager")
MODES = ("generate", "loglikelihood", "forward")
CACHES = ("dynamic", "static", "legacy")
KV_LAYOUTS = ("transformers", "expanded")
COMPUTE_DTYPES = ("float32", "float16", "bfloat16")
MAX_TOKENS = limits.high("context")  # far beyond any context window: protects the arithmetic, not the user
MAX_BATCH = limits.high("batch")


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
    attention_used: str = ""  # what is priced: eager without an SDPA path, "flash" with the kernel the model names
    peak_moment: str = ""  # where the peak comes: a moment of the forward (activations.Phase.name) or "decode"
    prompt: int = 0
    new_tokens: int = 0
    cache: str = "dynamic"
    weights_format: str = ""  # the storage: a dtype, or a quantization format such as bnb-nf4
    compute_dtype: str = ""  # what activations (and, for bitsandbytes, its matmuls) compute in
    quantized_matmul_bytes: int = 0  # transients of running a quantized matrix (in the peak)
    rounding_bytes: int = 0  # what the caching allocator adds to the weights and the cache
    encoder_tokens: int = 0  # an encoder-decoder's input when set apart from the decoder's prompt
    # what to pass to from_pretrained for these figures: sdpa, eager, or the kernel "flash" stands for
    attn_implementation: str = ""

    @property
    def steady_bytes(self) -> int:
        """Held from the start of the run to its end: the weights."""
        return self.weights_bytes

    def to_json(self) -> dict:
        return asdict(self)


def compute_dtype(dtype: str) -> str:
    """The dtype activations are computed in: quantized weights compute in 16 bits."""
    from calculator.memory.quantization import is_format

    if is_format(dtype):
        return "bfloat16"
    dtype = normalize_dtype(dtype)
    return dtype if dtype in FLOAT_DTYPES else "bfloat16"


def kv_dtype_for(dtype: str, kv_dtype: str | None) -> str:
    """The cache's dtype: its own when given (fp8/int8 caches), else the compute dtype."""
    return normalize_dtype(kv_dtype) if kv_dtype not in (None, "", "auto") else compute_dtype(dtype)


def check_sizes(batch: object, context: object) -> tuple[int, int]:
    return limits.check("batch", batch), limits.check("context", context)


def check_positions(spec: ArchSpec, tokens: int) -> int:
    """Refuse a sequence longer than the positions the model was built for."""
    if spec.max_positions and tokens > spec.max_positions:
        raise CalculatorError("context_too_long", tokens=Grouped(tokens), limit=Grouped(spec.max_positions))
    return tokens


def check_encoder_tokens(spec: ArchSpec, tokens: int | None) -> int | None:
    """An encoder-decoder's input length: whole, positive, within the encoder's positions."""
    if tokens is None:
        return None
    if spec.kind != "encoder-decoder":
        raise CalculatorError("encoder_needs_encoder_decoder", model_type=spec.model_type or spec.kind)
    check_sizes(1, tokens)
    limit = spec.encoder_tokens or spec.max_positions
    if limit and tokens > limit:
        raise CalculatorError("context_too_long", tokens=tokens, limit=limit)
    return tokens


def default_mode(spec: ArchSpec) -> str:
    return "generate" if can_generate(spec) else "forward"


def check_choices(attention: str, mode: str, spec: ArchSpec | None = None, cache: str = "dynamic") -> None:
    for name, value, choices in (("attention", attention, ATTENTION), ("mode", mode, MODES), ("cache", cache, CACHES)):
        if value not in choices:
            raise CalculatorError("unknown_choice", name=name, value=str(value)[:30], choices=", ".join(choices))
    if spec is not None and mode == "generate" and not can_generate(spec):
        raise CalculatorError("cannot_generate", model_type=spec.model_type or spec.kind)


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


def layer_cache_bytes(spec: ArchSpec, batch: int, tokens: int, kv_dtype: str) -> int:
    """The keys and values of the widest self-attention layer: what torch.cat copies when the
    dynamic cache grows by a token (the old and the new tensor live together for a moment)."""
    size = bytes_per_param(kv_dtype)
    groups = [g for g in spec.attention if not g.cross]
    return max((math.ceil(batch * g.cache_tokens(tokens, 0) * g.values_per_token() * size) for g in groups),
               default=0)


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


def _activation(spec, batch, tokens, dtype, attention, mode, kv_dtype, encoder_tokens=None) -> tuple[int, Phase]:
    """With encoder_tokens (an encoder-decoder): the encoder reads those, the decoder `tokens`."""
    if encoder_tokens is None:
        phase = peak_phase(spec, batch, tokens, dtype, attention, mode, kv_dtype)
    else:
        phase = peak_phase(spec, batch, encoder_tokens, dtype, attention, mode, kv_dtype, decoder_tokens=tokens)
    cache = kv_cache_bytes(spec, batch, tokens, kv_dtype_for(dtype, kv_dtype),
                           encoder_tokens=encoder_tokens) if mode != "forward" else 0
    return max(phase.total_bytes - cache, 0), phase


def _decode_step_bytes(spec: ArchSpec, batch: int, context: int, dtype: str, attention: str,
                       kv_dtype: str) -> int:
    """What the last decoding step holds beyond the weights and the cache: one token's
    activations (its logits above all), the eager attention's scores over the whole cache,
    and the layer whose keys and values torch.cat is copying."""
    one = forward_phases(spec, batch, 1, int(bytes_per_param(compute_dtype(dtype))),
                         float(bytes_per_param(kv_dtype)), attention_run(spec, attention), "generate")
    cache_one = kv_cache_bytes(spec, batch, 1, kv_dtype)
    step = max((p.total_bytes - cache_one for p in one), default=0)
    if attention_run(spec, attention) == "eager":
        step += batch * spec.heads * context * 4  # float32 softmax over the cache, one query
    return max(step, 0) + layer_cache_bytes(spec, batch, context, kv_dtype)


def weights_of(summary: ModelSummary, spec: ArchSpec, dtype: str, group_size: int = 128) -> tuple[int, str]:
    """(bytes, storage) of the weights: a dtype's size for every parameter, or a quantization
    format's real layout (modules it keeps in 16 bits, scales, tied heads)."""
    from calculator.memory.quantization import is_format, quantize_model

    if is_format(dtype):
        quantized = quantize_model(summary, spec, dtype, group_size)
        return quantized.total_bytes, quantized.format
    dtype = normalize_dtype(dtype)
    return summary.total_bytes_at(dtype), dtype


# ~1.6 KB an entry (measured with tracemalloc): a chapter's rerun asks a few hundred peaks;
# the last 4,096 cover several readers' cases at once (~7 MB at most).
@kept_by_inputs(maxsize=4096)
def inference_memory(summary: ModelSummary, spec: ArchSpec, batch: int, context: int | None = None,
                     dtype: str = "bfloat16", kv_dtype: str | None = None, attention: str = "sdpa",
                     mode: str | None = None, kv_layout: str = "transformers", *, prompt: int | None = None,
                     new_tokens: int = 0, cache: str = "dynamic", bnb_compute_dtype: str = "float32",
                     group_size: int = 128, encoder_tokens: int | None = None) -> InferenceMemory:
    """Peak memory of running `batch` sequences. With `prompt` and `new_tokens`: a prompt of
    that length, then that many generated tokens (the cache grows to prompt + new_tokens).
    With `context` alone: the worst case of a generation, a prompt as long as the whole context.
    dtype: a storage dtype or a quantization format (bnb-int8, bnb-nf4, gptq-4bit...);
    bnb_compute_dtype: bitsandbytes' 4-bit compute dtype (transformers' default: float32).
    encoder_tokens: an encoder-decoder's input length (workloads.py: seq2seq, speech); the
    prompt is then the decoder's, and the cache holds the decoder's own keys and values for
    prompt + new_tokens and each decoder layer's cross-attention keys and values over the
    encoder's tokens. Without it, the prompt is both (the encoder's input and a decoder as long),
    except for a speech model, whose encoder always reads its window (workloads.SPEECH_MODEL_TYPES)."""
    mode = mode or default_mode(spec)
    check_choices(attention, mode, spec, cache)
    if prompt is None:
        prompt, new_tokens = context, 0
    new_tokens = 0 if mode != "generate" else new_tokens
    if not isinstance(new_tokens, int) or isinstance(new_tokens, bool) or new_tokens < 0:
        raise CalculatorError("bad_size", name="new tokens", value=str(new_tokens)[:30], high=MAX_TOKENS)
    batch, prompt = check_sizes(batch, prompt)
    context = check_positions(spec, check_sizes(batch, prompt + new_tokens)[1])
    if encoder_tokens is None and is_speech(spec):
        encoder_tokens = spec.encoder_tokens or None  # a speech encoder always reads its 30 s window
    encoder_tokens = check_encoder_tokens(spec, encoder_tokens)
    weights, storage = weights_of(summary, spec, dtype, group_size)
    act_dtype = compute_dtype(dtype)
    cache_dtype = kv_dtype_for(dtype, kv_dtype)
    used = attention_run(spec, attention)
    enc = {"encoder_tokens": encoder_tokens}
    kv = kv_cache_bytes(spec, batch, context, cache_dtype, layout=kv_layout, **enc) if mode != "forward" else 0
    prefill_activation, phase = _activation(spec, batch, prompt, act_dtype, attention, mode, cache_dtype,
                                            encoder_tokens)
    prompt_cache = kv_cache_bytes(spec, batch, prompt, cache_dtype, layout=kv_layout, **enc) \
        if mode != "forward" else 0
    if cache == "static" and mode == "generate":
        prompt_cache = kv  # allocated in full when generate() starts
    matmul = _quantized_transient(summary, spec, storage, batch * (encoder_tokens or prompt), bnb_compute_dtype,
                                  act_dtype)
    moments = {phase.name: prompt_cache + prefill_activation + matmul}
    if mode == "generate" and new_tokens:
        step = _decode_step_bytes(spec, batch, context, act_dtype, attention, cache_dtype)
        if cache == "static":
            step -= layer_cache_bytes(spec, batch, context, cache_dtype)  # written in place
        elif cache == "legacy":  # the whole previous cache, not one layer's, lives beside the new one
            step += kv_cache_bytes(spec, batch, context - 1, cache_dtype, layout=kv_layout, **enc) \
                - layer_cache_bytes(spec, batch, context, cache_dtype)
        moments["decode"] = kv + step + _quantized_transient(summary, spec, storage, batch, bnb_compute_dtype,
                                                            act_dtype)
    moment = max(moments, key=moments.get)
    peak = moments[moment]
    rounding = _rounding(summary, spec, storage, batch, context, cache_dtype, kv)
    return InferenceMemory(weights, kv, max(peak - kv, 0), weights + max(peak, kv), batch, context, storage,
                           cache_dtype, attention, mode, used, moment, prompt, new_tokens, cache, storage,
                           bnb_compute_dtype if storage.startswith("bnb-") else act_dtype,
                           matmul if moment != "decode" else 0, rounding, encoder_tokens or 0,
                           attn_implementation=spec.flash_kernel if used == "flash" else used)


def _quantized_transient(summary, spec, storage: str, rows: int, bnb_compute: str, act_dtype: str) -> int:
    from calculator.memory.quantization import is_format, matmul_transient_bytes

    if not is_format(storage):
        return 0
    return matmul_transient_bytes(summary, spec, storage, rows, bnb_compute, act_dtype)


def _rounding(summary, spec, storage: str, batch: int, context: int, cache_dtype: str, kv: int) -> int:
    """The caching allocator's rounding of the long-lived tensors: each weight matrix and each
    layer's keys and values are allocations of their own (budget.rounding_bytes)."""
    from calculator.core.budget import rounding_bytes
    from calculator.memory.quantization import is_format, matrix_bytes, quant_format

    fmt = quant_format(storage) if is_format(storage) else None
    size = None if fmt else bytes_per_param(storage)
    waste = 0
    for m in summary.linears:
        one = matrix_bytes(fmt, m.in_features, m.out_features) if fmt else math.ceil(m.in_features * m.out_features * size)
        waste += m.count * rounding_bytes([one])
    layers = sum(g.layers for g in spec.attention)
    if kv and layers:
        waste += 2 * layers * rounding_bytes([kv // (2 * layers)])
    return waste


def largest_batch(summary, spec, capacity, context: int | None = None, **options) -> int:
    return largest_fitting(capacity, lambda b: inference_memory(summary, spec, b, context, **options), MAX_BATCH)


def largest_context(summary, spec, capacity, batch: int, limit: int | None = None, **options) -> int:
    """The longest context that fits at this batch. With new_tokens in the options, the
    prompt grows and the answer keeps its length."""
    high = min(limit or spec.max_positions or MAX_TOKENS, spec.max_positions or MAX_TOKENS)
    new_tokens = options.pop("new_tokens", 0) or 0
    options.pop("prompt", None)
    if new_tokens:
        if high <= new_tokens:
            return 0
        return new_tokens + largest_fitting(capacity, lambda p: inference_memory(
            summary, spec, batch, prompt=p, new_tokens=new_tokens, **options), high - new_tokens)
    return largest_fitting(capacity, lambda t: inference_memory(summary, spec, batch, t, **options), high)
