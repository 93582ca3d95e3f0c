"""Serving engines: how vLLM and SGLang turn a card into a paged KV-cache pool.

The pieces both engines share, per GPU (per tensor-parallel rank), in bytes: the KV cache
pages and the weights as the engines load them. Each engine's own accounting is in vllm.py and
sglang.py (their versions: versions.py); the plan that puts them together (a deployment, its
verdict, the layouts for U users) is in plan.py. Sources were read in the engines' released code
(file:line of the release named; the research notes of this chapter keep the full citations):

- vLLM V1, as of 0.19 (the release of the published logs this model is checked against):
  `--gpu-memory-utilization` is a share of the card's TOTAL memory, per instance
  (v1/worker/gpu_worker.py, requested_memory = total x util); the KV pool is what is left
  once the weights, the torch peak of a profile run and the growth of non-torch memory are
  taken out (utils memory_profiling: non_kv_cache_memory = weights + torch peak increase +
  non-torch increase). CUDA graphs are captured after the pool is allocated, inside the
  1 - util left over; from v0.21 vLLM subtracts its estimate of them from the pool instead.
- The pool is cut into blocks of 16 tokens; a block of one layer holds the keys and values
  of its rank's key/value heads (v1/kv_cache_interface.py page_size_bytes); MLA stores one
  latent of kv_lora_rank + qk_rope_head_dim per token, not split by tensor parallelism
  (config/model.py get_num_kv_heads, get_head_size); layers of different kinds (full,
  sliding window) go into groups of as many layers as the rarest kind has
  (v1/core/kv_cache_utils.py, hybrid allocator); blocks = available // (page x group size).
- SGLang: no profile run; weights + pool = mem_fraction_static x the free memory measured
  before the weights are loaded (model_executor/model_runner.py profile_max_num_token); its
  default fraction: sglang.py.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

from calculator.models.architecture import ArchSpec
from calculator.core.budget import rounding_bytes
from calculator.core.errors import CalculatorError
from calculator.serving.refusals import not_served_code
from calculator.models.families import family_of
from calculator.distributed.parallel import tensor_parallel
from calculator.core.precision import FLOAT_DTYPES, normalize_dtype
from calculator.memory.quantization import is_router
from calculator.models.summary import ModelSummary

BLOCK_TOKENS = 16  # vLLM's default block size on CUDA (platforms/cuda.py)
VOCAB_PADDING = 64  # vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE
ENGINES = ("vllm", "sglang")
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}  # as the engines write their own names
KV_DTYPES = ("auto", "float32", "float16", "bfloat16", "float8")

MAX_TENSOR = 16
MAX_TOKENS = 10**8
MAX_USERS = 10**7


def check_count(name: str, value: object, high: int, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise CalculatorError("bad_size", name=name, value=str(value)[:30], high=high)
    return value


def check_fraction(value: object) -> float:
    """A share of the card: above 0, at most 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise CalculatorError("bad_fraction", value=str(value)[:30])
    return float(value)


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise CalculatorError("unknown_choice", name="engine", value=str(engine)[:30], choices=", ".join(ENGINES))
    return engine


def compute_bytes(dtype: str) -> int:
    """Bytes of an activation: float32 models compute in float32, everything else in 16 bits."""
    return 4 if normalize_dtype(dtype) == "float32" else 2


def kv_element_bytes(dtype: str, kv_dtype: str | None) -> int:
    """vLLM's --kv-cache-dtype: auto is the model's dtype, fp8 is one byte."""
    if kv_dtype in (None, "", "auto"):
        return compute_bytes(dtype)
    name = normalize_dtype(kv_dtype)
    if name not in KV_DTYPES:
        raise CalculatorError("unknown_choice", name="KV cache dtype", value=str(kv_dtype)[:30],
                              choices=", ".join(KV_DTYPES))
    return {"float32": 4, "float16": 2, "bfloat16": 2, "float8": 1}[name]


# -- KV cache pages ---------------------------------------------------------------------------

@dataclass(frozen=True)
class KvGroup:
    """One KV cache group of vLLM's allocator: `layers` layer slots of the same kind, each
    holding `page_bytes` per block on this GPU."""

    kind: str  # "full", "sliding" or "mla"
    layers: int
    page_bytes: int
    window: int | None = None
    chunked: bool = False  # a sliding group whose window is an attention chunk (Llama 4)

    def blocks_per_sequence(self, context: int, batched_tokens: int) -> int:
        """Blocks one sequence of `context` tokens takes in this group (max_memory_usage_bytes
        of the layer's spec): a sliding-window layer keeps window - 1 + a prefill chunk, plus
        one block for a window that straddles two; a chunked layer keeps its chunk + a prefill
        chunk and no extra block, since chunks start on block boundaries
        (v1/kv_cache_interface.py ChunkedLocalAttentionSpec, SlidingWindowSpec)."""
        if self.chunked:
            return math.ceil(min(self.window + batched_tokens, context) / BLOCK_TOKENS)
        if self.kind == "sliding":
            kept = min(self.window - 1 + batched_tokens, context)
            return math.ceil(kept / BLOCK_TOKENS) + 1
        return math.ceil(context / BLOCK_TOKENS)


def is_mla(spec: ArchSpec) -> bool:
    return bool(spec.mla_expanded_dim)


def kv_heads_per_gpu(spec: ArchSpec, tensor: int) -> int:
    """Key/value heads one rank stores: split by tensor parallelism, replicated when there are
    fewer heads than GPUs (max(1, heads // tp)); MLA's one latent is never split."""
    groups = [g for g in spec.attention if not g.cross]
    heads = groups[0].kv_heads if groups else spec.kv_heads
    return heads if is_mla(spec) else max(1, heads // tensor)


def kv_groups(spec: ArchSpec, tensor: int = 1, kv_bytes: int = 2) -> tuple[KvGroup, ...]:
    """The model's KV cache groups on one rank. One kind of layer: one group of every layer.
    Several kinds with the same page (Gemma 2: full and sliding): groups of as many layers as
    the rarest kind has, so 21 + 21 layers make 2 groups of 21."""
    if not spec.has_kv_cache or spec.kind != "decoder":
        raise CalculatorError(not_served_code(spec), model_type=spec.model_type or spec.kind)
    from calculator.memory.kv_layers import cache_layers

    kinds: dict[tuple[str, int | None, bool], tuple[int, int]] = {}
    for layer in cache_layers(spec):  # the one description of what each layer caches
        page = BLOCK_TOKENS * layer.heads_per_gpu(tensor) * (layer.k_dim + layer.v_dim) * kv_bytes
        key = (layer.kind, layer.window, layer.chunked)
        layers, _ = kinds.get(key, (0, page))
        kinds[key] = (layers + 1, page)
    if len(kinds) == 1:
        (kind, window, chunked), (layers, page) = next(iter(kinds.items()))
        return (KvGroup(kind, layers, page, window, chunked),)
    size = min(layers for layers, _ in kinds.values())
    out = []
    for (kind, window, chunked), (layers, page) in kinds.items():
        out += [KvGroup(kind, size, page, window, chunked)] * math.ceil(layers / size)
    return tuple(out)


def kv_bytes_per_token_per_gpu(spec: ArchSpec, tensor: int, kv_bytes: int) -> int:
    """Cache bytes one more token costs on one rank, every layer counted (no window reached)."""
    return sum(g.layers * g.page_bytes for g in kv_groups(spec, tensor, kv_bytes)) // BLOCK_TOKENS


def sequence_blocks(groups: tuple[KvGroup, ...], context: int, batched_tokens: int) -> int:
    """Blocks of the shared pool one sequence takes: one per group for each of its blocks."""
    return sum(g.blocks_per_sequence(context, batched_tokens) for g in groups)


def max_sequences(blocks: int, groups: tuple[KvGroup, ...], context: int, batched_tokens: int,
                  shared_prefix: int = 0) -> int:
    """Sequences of `context` tokens that hold their blocks at once. One block is vLLM's null
    block (BlockPool keeps it back). With prefix caching, the full blocks of a prompt prefix
    that every sequence shares are stored once in full-attention and MLA groups."""
    usable = blocks - 1
    need = sequence_blocks(groups, context, batched_tokens)
    shared = sum(min(shared_prefix, context) // BLOCK_TOKENS for g in groups if g.kind != "sliding")
    if usable < need:
        return 0
    return 1 + (usable - need) // max(need - shared, 1)


def pool_blocks(groups: tuple[KvGroup, ...], available_bytes: int) -> int:
    """Blocks of vLLM's pool: each block holds one page for every layer slot of a group (the
    groups share the blocks' tensors), so a block costs page x group size
    (v1/core/kv_cache_utils.py get_num_blocks: available // page_size // num_layers)."""
    return max(available_bytes, 0) // (groups[0].page_bytes * groups[0].layers)


def pool_tokens(groups: tuple[KvGroup, ...], blocks: int) -> int:
    """vLLM's "GPU KV cache size: N tokens" line: the blocks one group gets, in tokens
    (num_blocks // len(kv_cache_groups) x block_size)."""
    return blocks // len(groups) * BLOCK_TOKENS


def concurrency(blocks: int, groups: tuple[KvGroup, ...], context: int, batched_tokens: int) -> float:
    """vLLM's own "Maximum concurrency for L tokens per request" line (num_blocks over the
    blocks of one request, block-aware)."""
    return blocks / sequence_blocks(groups, context, batched_tokens)


# -- weights per GPU --------------------------------------------------------------------------

WEIGHT_DTYPES = ("float32", "float16", "bfloat16", "float8", "int8", "int4")
INT4_GROUP = 128  # w4a16 checkpoints (GPTQ, AWQ, compressed-tensors): a float16 scale per 128 inputs


def serving_weights(dtype: str) -> str:
    """The engine layout a precision of the case is served in: plain dtypes as they are, the
    fp8 formats as float8, GPTQ and AWQ as int4 (both are w4a16 in vLLM). bitsandbytes and GGUF
    formats are refused: the engines' layouts for them are not priced here."""
    from calculator.memory.quantization import is_format, quant_format

    if not is_format(dtype):
        return dtype
    fmt = quant_format(dtype)
    if fmt.family == "float8":
        return "float8"
    if fmt.key in ("gptq-4bit", "awq-4bit"):
        return "int4"
    raise CalculatorError("serve_format", name=fmt.key, choices=", ".join(WEIGHT_DTYPES))


def quantized_matrix_bytes(storage: str, parameters: float, out_features: float, zero_points: bool = False) -> float:
    """A linear layer's slice in vLLM's quantized layouts: float8 and int8 (w8a8) store one
    byte per weight and a float32 scale per output channel; int4 (w4a16) half a byte and a
    float16 scale per group of 128 inputs. AWQ is asymmetric: it also keeps a 4-bit zero point
    per group and output (awq_marlin.py create_weights: qzeros int32 [groups, out / 8], repacked
    to Marlin's layout at the same size); GPTQ and compressed-tensors w4a16 checkpoints are
    symmetric, and gptq_marlin drops their zero points."""
    if storage in ("float8", "int8"):
        return parameters + 4 * out_features
    zeros = parameters / INT4_GROUP / 2 if zero_points else 0.0
    return parameters / 2 + 2 * parameters / INT4_GROUP + zeros


def weights_per_gpu(summary: ModelSummary, spec: ArchSpec, config: dict | None, dtype: str, tensor: int,
                    zero_points: bool = False) -> int:
    """What `Model loading took X GiB` reports on one rank: the rank's slice of every split
    matrix and of the vocabulary (padded to a multiple of 64), whatever is replicated, the
    rotary cos/sin table vLLM builds in the model's dtype over every position, and for MLA
    the two absorbed copies of kv_b_proj it keeps beside it. float8, int8 and int4 quantize
    the linear layers (not the embeddings, the output head or the routers)."""
    storage = normalize_dtype(dtype)
    if storage not in WEIGHT_DTYPES:
        raise CalculatorError("unknown_dtype", dtype=str(dtype)[:40], choices=", ".join(WEIGHT_DTYPES))
    quantized = storage not in FLOAT_DTYPES
    a = compute_bytes(storage)
    base = tensor_parallel(summary, spec, "bfloat16" if quantized else storage, tensor)
    total = float(base.per_gpu_bytes)
    if quantized:
        linears = [m for m in summary.linears if m.kind != "tied-head"]
        for matrix, split in zip(linears, base.matrices):
            if matrix.kind == "head" or is_router(matrix, spec):
                continue
            params = split.bytes_per_gpu / 2
            outputs = matrix.out_features * matrix.count / (tensor if split.split == "columns" else 1)
            total += quantized_matrix_bytes(storage, params, outputs, zero_points) - split.bytes_per_gpu
    config = config or {}
    padded = math.ceil(spec.vocab / VOCAB_PADDING) * VOCAB_PADDING if spec.vocab else 0
    vocab_matrices = 1 + (not config.get("tie_word_embeddings", False) and spec.head == "lm")
    total += vocab_matrices * (padded - spec.vocab) * spec.hidden * a / tensor
    total += rotary_table_bytes(spec, config, a)
    if is_mla(spec):
        rank = int(config.get("kv_lora_rank") or 0)
        per_head = int(config.get("qk_nope_head_dim") or 0) + int(config.get("v_head_dim") or 0)
        total += spec.layers * rank * (spec.heads // tensor) * per_head * a
    return math.ceil(total)


def experts_bytes_per_gpu(summary: ModelSummary, spec: ArchSpec, dtype: str, tensor: int,
                          zero_points: bool = False) -> int:
    """The routed experts' share of weights_per_gpu: what expert parallelism spreads further."""
    if not spec.experts:
        return 0
    storage = normalize_dtype(dtype)
    quantized = storage not in FLOAT_DTYPES
    base = tensor_parallel(summary, spec, "bfloat16" if quantized else storage, tensor)
    total = 0.0
    linears = [m for m in summary.linears if m.kind != "tied-head"]
    for matrix, split in zip(linears, base.matrices):
        if matrix.kind != "experts":
            continue
        if quantized:
            outputs = matrix.out_features * matrix.count / (tensor if split.split == "columns" else 1)
            total += quantized_matrix_bytes(storage, split.bytes_per_gpu / 2, outputs, zero_points)
        else:
            total += split.bytes_per_gpu
    return math.ceil(total)


# Matrices the engines load as one tensor (QKVParallelLinear, MergedColumnParallelLinear).
FUSED = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "gate_proj": "gate_up", "up_proj": "gate_up"}


def allocator_rounding_bytes(summary: ModelSummary, spec: ArchSpec, dtype: str, tensor: int) -> int:
    """What the CUDA caching allocator adds to the weights of one rank: each fused matrix (and
    each layer's experts) is one allocation, rounded to its segment (budget.rounding_bytes).
    SGLang measures its weights as free memory lost, so its figure includes this; vLLM's
    (max_memory_allocated) does not. Quantized layouts are not rounded here."""
    storage = normalize_dtype(dtype)
    if storage not in FLOAT_DTYPES:
        return 0
    base = tensor_parallel(summary, spec, storage, tensor)
    tensors: dict[tuple, list] = {}
    linears = [m for m in summary.linears if m.kind != "tied-head"]
    for index, (matrix, split) in enumerate(zip(linears, base.matrices)):
        copies = max(matrix.count // spec.experts, 1) if matrix.kind == "experts" and spec.experts else matrix.count
        key = (FUSED.get(matrix.name, f"{matrix.name}#{index}"), copies, matrix.kind)
        entry = tensors.setdefault(key, [copies, 0.0])
        entry[1] += split.bytes_per_gpu / copies
    embedding = math.ceil(spec.vocab * spec.hidden * compute_bytes(storage) / tensor)
    sizes = [(copies, math.ceil(size)) for copies, size in tensors.values()] + [(1, embedding)]
    return sum(copies * rounding_bytes([size]) for copies, size in sizes)


# Rotary scalings whose table vLLM extends to max positions x factor
# (rotary_embedding/linear_scaling_rope.py, dynamic_ntk_scaling_rope.py: "the maximum length
# after applying the rope scaling is self.max_position_embeddings * self.scaling_factor").
EXTENDED_ROPE = ("linear", "dynamic")
# Models whose sliding-window layers get a rotary embedding of their own (gemma3.py: the local
# layers use rope_local_base_freq with no scaling, the global ones rope_theta and the scaling).
LOCAL_ROPE_MODELS = ("gemma3", "gemma3_text")


def rotary_positions(spec: ArchSpec, config: dict) -> list[int]:
    """The rows of each cos/sin table vLLM builds: get_rope caches one table per distinct
    set of rotary parameters, so most models have one and Gemma 3 two."""
    text = config.get("text_config") or config
    scaling = text.get("rope_scaling") or config.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type"))
    factor = float(scaling.get("factor") or 1.0) if kind in EXTENDED_ROPE else 1.0
    tables = [int(spec.max_positions * factor)]
    if spec.model_type in LOCAL_ROPE_MODELS and any(group.window for group in spec.attention):
        tables.append(spec.max_positions)
    return tables


def rotary_table_bytes(spec: ArchSpec, config: dict, a: int) -> int:
    """vLLM's cos/sin caches: for each table, its positions x rotary dimensions, in the
    model's dtype (rotary_embedding/base.py: `cache.to(dtype)`)."""
    if family_of(spec.model_type).positions != "rotary" or not spec.max_positions:
        return 0
    if is_mla(spec):
        dims = int(config.get("qk_rope_head_dim") or 0)
    else:
        dims = int(spec.head_dim * float(config.get("partial_rotary_factor") or 1.0))
    return sum(rotary_positions(spec, config)) * dims * a


