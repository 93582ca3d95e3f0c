"""Serving engines: how vLLM and SGLang turn a card into a paged KV-cache pool.

The pieces of the engines' own accounting, per GPU (per tensor-parallel rank), in bytes.
The plan that puts them together (a deployment, its verdict, the layouts for U users) is in
serving_plan.py. Sources were read in the engines' released code (file:line of the release
named; the research notes of this chapter keep the full citations):

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
- SGLang (0.4.6.post5): no profile run; weights + pool = mem_fraction_static x the free
  memory measured before the weights are loaded (model_executor/model_runner.py
  profile_max_num_token), and its default fraction is a table on the card and the TP size
  (server_args.py).
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

GIB = 2**30
BLOCK_TOKENS = 16  # vLLM's default block size on CUDA (platforms/cuda.py)
VOCAB_PADDING = 64  # vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE
ENGINES = ("vllm", "sglang")
# vLLM's accounting: the current one by default, 0.19's (the release of the published logs
# bench/data/serving_logs.json compares against) on request. What changed in between, read in
# the source: --gpu-memory-utilization defaults to 0.92 (config/cache.py, `Field(default=0.92)`,
# 0.9 before), and the CUDA graphs' memory is estimated during the profile run and taken out of
# the pool (gpu_worker.py determine_available_memory: available = requested - non_kv_cache_memory
# - cudagraph_memory_estimate_applied; "CUDA graph memory profiling is enabled (default since
# v0.21.0)"), where 0.19 captured them afterwards in the 1 - util left over.
VLLM_CURRENT = "0.33"
VLLM_VERSIONS = ("0.19", VLLM_CURRENT)
VLLM_VERSION = VLLM_CURRENT
SGLANG_VERSION = "0.4.6"
VLLM_UTILIZATIONS = {"0.19": 0.9, VLLM_CURRENT: 0.92}
VLLM_UTILIZATION = VLLM_UTILIZATIONS[VLLM_CURRENT]
# Measured, not derived: vLLM's "Estimated CUDA graph memory: X GiB total" with its default
# capture sizes (51 piecewise up to 512, 35 full up to 256) on one GPU for an 8B model: 0.52 GiB
# (LMCache#3430, vLLM 0.21.0, Qwen3-8B on an RTX A5000). Other published estimates: 0.13 to
# 0.58 GiB (smaller capture sizes, TP2 to TP4), 2.2 GiB (a MoE with a draft model, TP4), 4.3 GiB
# (an FP4 model, TP2): bench/data/serving_logs_current.json. --enforce-eager captures none.
CUDA_GRAPH_BYTES = round(0.5 * GIB)
KV_DTYPES = ("auto", "float32", "float16", "bfloat16", "float8")

# Measured, not derived (vLLM 0.19 startup logs on H100, bench/data/serving_logs.json):
# - the non-torch memory that grows during the profile run: attention-backend workspaces on
#   one GPU (0.24 to 0.27 GiB), plus NCCL and custom all-reduce buffers with tensor
#   parallelism (2.06 to 2.21 GiB). The engine measures it with cudaMemGetInfo; nothing in a
#   config predicts it.
NON_TORCH_BYTES_ONE_GPU = round(0.25 * GIB)
NON_TORCH_BYTES_TENSOR_PARALLEL = round(2.1 * GIB)
# - the sampler's warm-up in the profile run: the logits of min(max_num_batched_tokens,
#   max_num_seqs) rows, then their float32 copy and the top-k/top-p work buffers. Beyond the
#   logits themselves this holds 12.7 to 13.1 bytes per logit in the logs (vocabularies of
#   51k to 256k, bfloat16 and float32): 13, fitted on one development row
#   (Llama-3.1-8B, bfloat16) and checked on the others.
SAMPLER_BYTES_PER_LOGIT = 13
# - SGLang measures the free memory once CUDA and NCCL are up, before the weights: the card's
#   total less about 0.4 GiB (78.81 of 79.19 GiB on an H100, 21.63 of 22.04 GiB on an L4).
SGLANG_START_BYTES = round(0.4 * GIB)

# vLLM's scheduler limits when the user sets none (engine/arg_utils.py
# EngineArgs.get_batch_defaults): cards whose total memory is 70 GiB or more, other than the
# A100 (PR #17885: larger steps slowed it down), get larger ones; `vllm serve` (the OpenAI
# server's usage context) and the offline `LLM` class differ in the tokens per step.
# (max_num_batched_tokens, max_num_seqs) by (usage context, big card):
BIG_CARD_BYTES = 70 * GIB
USAGES = ("server", "offline")
DEFAULT_LIMITS = {("server", True): (8192, 1024), ("server", False): (2048, 256),
                  ("offline", True): (16384, 1024), ("offline", False): (8192, 256)}

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


def check_version(version: str) -> str:
    if version not in VLLM_VERSIONS:
        raise CalculatorError("unknown_choice", name="engine version", value=str(version)[:30],
                              choices=", ".join(VLLM_VERSIONS))
    return version


def cuda_graph_bytes(version: str, enforce_eager: bool) -> int:
    """What vLLM takes out of the pool for its CUDA graphs: nothing in 0.19 (they were captured
    after the pool, in the memory the share leaves), nothing with --enforce-eager."""
    return 0 if version == "0.19" or enforce_eager else CUDA_GRAPH_BYTES


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


def default_limits(total_bytes: int, gpu_key: str = "", usage: str = "server") -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that vLLM picks on this card when none is given:
    the one place the serving chapter's calculators and `serve` take them from."""
    if usage not in USAGES:
        raise CalculatorError("unknown_choice", name="usage context", value=str(usage)[:30], choices=", ".join(USAGES))
    big = total_bytes >= BIG_CARD_BYTES and "a100" not in gpu_key
    return DEFAULT_LIMITS[(usage, big)]


# -- KV cache pages ---------------------------------------------------------------------------

@dataclass(frozen=True)
class KvGroup:
    """One KV cache group of vLLM's allocator: `layers` layer slots of the same kind, each
    holding `page_bytes` per block on this GPU."""

    kind: str  # "full", "sliding" or "mla"
    layers: int
    page_bytes: int
    window: int | None = None

    def blocks_per_sequence(self, context: int, batched_tokens: int) -> int:
        """Blocks one sequence of `context` tokens takes in this group (max_memory_usage_bytes
        of the layer's spec): a sliding-window layer keeps window - 1 + a prefill chunk, plus
        one block for a window that straddles two."""
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

    kinds: dict[tuple[str, int | None], tuple[int, int]] = {}
    for layer in cache_layers(spec):  # the one description of what each layer caches
        page = BLOCK_TOKENS * layer.heads_per_gpu(tensor) * (layer.k_dim + layer.v_dim) * kv_bytes
        layers, _ = kinds.get((layer.kind, layer.window), (0, page))
        kinds[(layer.kind, layer.window)] = (layers + 1, page)
    if len(kinds) == 1:
        (kind, window), (layers, page) = next(iter(kinds.items()))
        return (KvGroup(kind, layers, page, window),)
    size = min(layers for layers, _ in kinds.values())
    out = []
    for (kind, window), (layers, page) in kinds.items():
        out += [KvGroup(kind, size, page, window)] * math.ceil(layers / size)
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


def quantized_matrix_bytes(storage: str, parameters: float, out_features: float) -> float:
    """A linear layer's slice in vLLM's quantized layouts: float8 and int8 (w8a8) store one
    byte per weight and a float32 scale per output channel; int4 (w4a16) half a byte and a
    float16 scale per group of 128 inputs."""
    if storage in ("float8", "int8"):
        return parameters + 4 * out_features
    return parameters / 2 + 2 * parameters / INT4_GROUP


def weights_per_gpu(summary: ModelSummary, spec: ArchSpec, config: dict | None, dtype: str, tensor: int) -> int:
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
            total += quantized_matrix_bytes(storage, params, outputs) - split.bytes_per_gpu
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


def experts_bytes_per_gpu(summary: ModelSummary, spec: ArchSpec, dtype: str, tensor: int) -> int:
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
            total += quantized_matrix_bytes(storage, split.bytes_per_gpu / 2, outputs)
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


def rotary_table_bytes(spec: ArchSpec, config: dict, a: int) -> int:
    """vLLM's cos/sin cache: max positions x rotary dimensions, in the model's dtype, once."""
    if family_of(spec.model_type).positions != "rotary" or not spec.max_positions:
        return 0
    if is_mla(spec):
        dims = int(config.get("qk_rope_head_dim") or 0)
    else:
        dims = int(spec.head_dim * float(config.get("partial_rotary_factor") or 1.0))
    return spec.max_positions * dims * a


# -- the profile run --------------------------------------------------------------------------

@dataclass(frozen=True)
class Profile:
    """The torch peak of vLLM's profile run, and what sets it."""

    peak_bytes: int
    moment: str  # "sampler" or "forward"
    forward_bytes: int
    sampler_bytes: int
    experts_bytes: int  # the fused-MoE kernel's buffers (in both moments)


def profile_peak(spec: ArchSpec, dtype: str, tensor: int, batched_tokens: int, max_seqs: int) -> Profile:
    """vLLM's profile run (gpu_model_runner.profile_run): a forward of max_num_batched_tokens
    tokens without a cache, split into min(tokens, max_num_seqs) requests, then the sampler
    over one row per request. Forward: the hidden states and the residual, with the widest
    moment of a layer (its query/key/value and attention output, or the MLP's widening:
    gate and up, then their product). Sampler: the forward's last hidden states, the logits
    of each request and the sampler's buffers (SAMPLER_BYTES_PER_LOGIT). Mixture-of-experts
    layers add the fused-MoE kernel's three buffers for tokens x top-k routed rows; the
    logged peaks (Qwen3-30B-A3B, Mixtral, DeepSeek-V2-Lite) are matched only when these are
    counted in the sampler's moment too, so they are: we did not find the line that keeps
    them, and say so."""
    t, a, h = tensor, compute_bytes(dtype), spec.hidden
    tokens, rows = batched_tokens, min(batched_tokens, max_seqs)
    hidden = tokens * h * a
    heads, d = spec.heads // t, spec.head_dim
    attention = tokens * (2 * heads + 2 * kv_heads_per_gpu(spec, t)) * d * a
    if spec.experts:
        width = spec.expert_intermediate // t
        experts = tokens * spec.experts_per_token * (3 * width + h) * a
        shared = 3 * tokens * (spec.shared_expert_intermediate // t) * a
        mlp = experts + shared
    else:
        experts = 0
        mlp = tokens * (3 if spec.gated_mlp else 2) * (spec.intermediate // t) * a
    forward = 2 * hidden + max(attention, mlp)
    sampler = hidden + rows * h * a + rows * spec.vocab * (a + SAMPLER_BYTES_PER_LOGIT) + experts
    moment = "sampler" if sampler >= forward else "forward"
    return Profile(max(forward, sampler), moment, forward, sampler, experts)


def non_torch_bytes(tensor: int) -> int:
    return NON_TORCH_BYTES_TENSOR_PARALLEL if tensor > 1 else NON_TORCH_BYTES_ONE_GPU


# -- SGLang -----------------------------------------------------------------------------------

def sglang_fraction(memory_bytes: int, tensor: int) -> float:
    """SGLang 0.4.6's default --mem-fraction-static (server_args.py), from the card's memory as
    nvidia-smi reports it and the number of GPUs of one model."""
    gib = memory_bytes / GIB
    if gib <= 80:
        fraction = next(f for at_least, f in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
                        if tensor >= at_least)
    else:
        fraction = 0.88
    if gib > 96:
        fraction = min(fraction + 48 * (1 - fraction) / gib, (gib - 18) / gib)
    return round(fraction, 4)
