"""A serving deployment: the engine's split of each card, the sequences that run at once, the
verdict for U users, and the layouts (tensor-parallel size x replicas) that serve them.

Built from the pieces of engines.py, vllm.py and sglang.py, which follow the engines' own
accounting: current vLLM V1 (`--engine vllm`, the default; 0.19 on request) and current SGLang
(`--engine sglang`; 0.4.6 on request), versions.py's table. Also here: the KV
cache llama.cpp's server allocates, and transformers without a serving engine across
several GPUs (device_map against tp_plan).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
import math

from calculator.core.budget import FITS, TIGHT, TOO_BIG, Budget, reserved_bytes
from calculator.core.errors import CalculatorError
from calculator.serving.refusals import not_served_code
from calculator.core.gpus import Gpu
from calculator.memory.kv_layers import has_linear_layers
from calculator.distributed.llama_cpp import SERVER_SLOTS, kv_cache
from calculator.memory.inference import check_positions, inference_memory, kv_bytes_per_token
from calculator.memory.quantization import is_format, quant_format
from calculator.distributed.parallel import check_degree, pipeline_split, tensor_parallel
from calculator.core import limits
from calculator.serving.engines import (BLOCK_TOKENS, allocator_rounding_bytes, MAX_TENSOR, check_count, check_engine, check_fraction, concurrency, experts_bytes_per_gpu, kv_bytes_per_token_per_gpu, kv_element_bytes, kv_groups, kv_heads_per_gpu, max_sequences, pool_blocks, pool_tokens, sequence_blocks, weights_per_gpu)
from calculator.core.units import GIB
from calculator.serving.vllm import (VLLM_CURRENT, VLLM_UTILIZATIONS, cuda_graph_bytes, default_limits,
                                     non_torch_bytes, profile_peak)
from calculator.serving.sglang import SGLANG_START_BYTES, pool_cell_bytes, sglang_fraction
from calculator.serving.versions import check_version
from calculator.serving.weights import format_weights_per_gpu, serving_precision

MAX_OFFLOAD_GIB = 4096
MAX_KV_BYTES = 2**50
# Why a deployment does not serve its users: no room left for a cache, one sequence of the
# context does not fit in the pool (vLLM refuses to start), the engine asks for more than the
# process can have, or too few sequences fit at once.
REASONS = ("no_cache_room", "context_exceeds_pool", "over_usable", "too_many_users")


@dataclass(frozen=True)
class Replica:
    """One copy of the model over `tensor` GPUs: what each of its GPUs holds."""

    tensor: int
    requested_bytes_per_gpu: int  # vLLM: total x util; SGLang: free memory at start x fraction
    weights_bytes_per_gpu: int
    cpu_offload_bytes_per_gpu: int
    activation_reserve_bytes: int  # vLLM: the profile run's torch peak; SGLang: the (1 - fraction) share
    non_torch_bytes: int
    available_kv_bytes_per_gpu: int
    kv_pool_bytes_per_gpu: int  # what the pool allocates: whole blocks (vLLM) or tokens (SGLang)
    kv_bytes_per_token_per_gpu: int
    kv_blocks: int | None  # vLLM only
    kv_groups: int
    kv_tokens: int  # the engine's "GPU KV cache size" line
    sequence_blocks: int | None
    max_concurrency: float  # the engine's own concurrency figure at the context
    sequences: int  # sequences of the context that hold their cache at once
    profile_moment: str
    memory_verdict: str
    cuda_graph_bytes: int = 0  # taken out of the pool for the CUDA graphs (current vLLM)

    @property
    def starts(self) -> bool:
        return self.sequences >= 1 and self.memory_verdict != TOO_BIG


@dataclass(frozen=True)
class Layout:
    tensor: int
    weights_bytes_per_gpu: int
    kv_pool_bytes_per_gpu: int
    kv_tokens: int
    sequences_per_replica: int
    replicas: int | None  # None: not one sequence fits with this tensor-parallel size
    gpus: int | None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Deployment:
    engine: str
    engine_version: str
    gpu: str
    gpus: int
    tensor: int
    replicas: int
    dtype: str
    kv_dtype: str
    context: int
    users: int
    utilization: float
    max_num_batched_tokens: int
    max_num_seqs: int
    total_bytes_per_gpu: int
    kv_bytes_per_token: int  # the whole model, one token, every layer
    replica: Replica
    max_concurrent_sequences: int  # over every replica
    verdict: str
    reason: str | None
    layouts: tuple[Layout, ...] = field(default_factory=tuple)
    enforce_eager: bool = False
    expert_parallel: bool = False
    kv_cache_memory_bytes: int | None = None  # --kv-cache-memory-bytes: the pool, set by hand
    dtype_source: str = "given"  # "as_shipped" / "shipped_not_run" / "default": none asked (weights.py)

    @property
    def fits(self) -> bool:
        return self.verdict == FITS

    @property
    def best_layout(self) -> Layout | None:
        served = [lay for lay in self.layouts if lay.gpus is not None]
        return min(served, key=lambda lay: (lay.gpus, lay.tensor)) if served else None

    def to_json(self) -> dict:
        r = self.replica
        best = self.best_layout
        return {
            "engine": self.engine, "engine_version": self.engine_version, "gpu": self.gpu, "gpus": self.gpus,
            "tensor_parallel": self.tensor, "replicas": self.replicas, "dtype": self.dtype,
            "kv_dtype": self.kv_dtype, "context": self.context, "users": self.users,
            "gpu_memory_utilization": self.utilization, "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_num_seqs": self.max_num_seqs, "total_bytes_per_gpu": self.total_bytes_per_gpu,
            "requested_bytes_per_gpu": r.requested_bytes_per_gpu,
            "weights_bytes_per_gpu": r.weights_bytes_per_gpu,
            "cpu_offload_bytes_per_gpu": r.cpu_offload_bytes_per_gpu,
            "activation_reserve_bytes": r.activation_reserve_bytes, "profile_peak_moment": r.profile_moment,
            "non_torch_bytes": r.non_torch_bytes, "available_kv_bytes_per_gpu": r.available_kv_bytes_per_gpu,
            "kv_pool_bytes_per_gpu": r.kv_pool_bytes_per_gpu, "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_token_per_gpu": r.kv_bytes_per_token_per_gpu, "kv_blocks": r.kv_blocks,
            "block_tokens": BLOCK_TOKENS if self.engine == "vllm" else 1, "kv_cache_groups": r.kv_groups,
            "kv_tokens": r.kv_tokens, "max_concurrency": round(r.max_concurrency, 2),
            "sequences_per_replica": r.sequences, "max_concurrent_sequences": self.max_concurrent_sequences,
            "memory_verdict": r.memory_verdict, "verdict": self.verdict, "fits": self.fits, "reason": self.reason,
            "layouts": [lay.to_json() for lay in self.layouts], "cuda_graph_bytes": r.cuda_graph_bytes,
            "enforce_eager": self.enforce_eager, "expert_parallel": self.expert_parallel,
            "kv_cache_memory_bytes": self.kv_cache_memory_bytes, "dtype_source": self.dtype_source,
            "best_layout": best.to_json() if best else None,
        }


@dataclass(frozen=True)
class VllmOptions:
    """What changes vLLM's accounting beyond the sizes: its version, --enforce-eager,
    --kv-cache-memory-bytes, and expert parallelism over `expert_shards` GPUs per expert slice."""

    version: str = VLLM_CURRENT
    enforce_eager: bool = False
    kv_cache_memory_bytes: int | None = None
    expert_parallel: bool = False
    weights_format: str | None = None  # mxfp4, nvfp4, fp8-block128: priced by weights.py
    zero_points: bool = False  # AWQ's 4-bit zero points (engines.quantized_matrix_bytes)


def _replica(model, card: Gpu, engine: str, tensor: int, dtype: str, kv_bytes: int, context: int,
             utilization: float, batched: int, seqs: int, offload_bytes: int, shared_prefix: int,
             options: VllmOptions = VllmOptions(), replicas: int = 1) -> Replica:
    spec = model.spec
    fmt = options.weights_format
    weights = weights_per_gpu(model.summary, spec, model.config, "bfloat16" if fmt else dtype, tensor,
                              options.zero_points)
    if fmt:
        weights = format_weights_per_gpu(model.summary, spec, fmt, tensor, card, weights, engine=engine)
    if options.expert_parallel and replicas > 1:
        # --enable-expert-parallel: the experts spread over every GPU (tensor x data parallel),
        # attention and the rest stay split by tensor parallelism within each replica
        experts = experts_bytes_per_gpu(model.summary, spec, "bfloat16" if fmt else dtype, tensor, options.zero_points)
        if fmt:
            experts = format_weights_per_gpu(model.summary, spec, fmt, tensor, card, experts, experts_only=True,
                                             engine=engine)
        weights -= experts - math.ceil(experts / replicas)
    offload = min(weights, offload_bytes)
    weights -= offload
    per_token = kv_bytes_per_token_per_gpu(spec, tensor, kv_bytes)
    budget = Budget(card)
    if engine == "sglang":  # its weights as it measures them: free memory lost, allocator rounding included
        weights += allocator_rounding_bytes(model.summary, spec, dtype, tensor)
        free = card.total_bytes - SGLANG_START_BYTES
        requested = math.floor(free * utilization)
        available = requested - weights
        per_token = sglang_cell_bytes(spec, tensor, kv_bytes, options.version)
        tokens = int(max(available, 0) // per_token)
        sequences = 0 if tokens < context else 1 + (tokens - context) // max(context - shared_prefix, 1)
        return Replica(tensor, requested, weights, offload, free - requested, 0, available, math.ceil(tokens * per_token),
                       math.ceil(per_token), None, 1, tokens, None, tokens / context, sequences, "reserved share",
                       budget.verdict_for(requested))
    profile = profile_peak(spec, dtype, tensor, batched, seqs)
    other = non_torch_bytes(tensor)
    graphs = cuda_graph_bytes(options.version, options.enforce_eager)
    if options.kv_cache_memory_bytes is not None:  # the pool is set by hand; the share no longer matters
        available = options.kv_cache_memory_bytes
        requested = weights + profile.peak_bytes + other + graphs + available
    else:
        requested = math.ceil(card.total_bytes * utilization)
        available = requested - weights - profile.peak_bytes - other - graphs
    groups = kv_groups(spec, tensor, kv_bytes)
    blocks = pool_blocks(groups, available)
    return Replica(tensor, requested, weights, offload, profile.peak_bytes, other, available,
                   blocks * groups[0].page_bytes * groups[0].layers, per_token, blocks, len(groups),
                   pool_tokens(groups, blocks),
                   sequence_blocks(groups, context, batched), concurrency(blocks, groups, context, batched),
                   max_sequences(blocks, groups, context, batched, shared_prefix), profile.moment,
                   budget.verdict_for(requested), graphs)


def sglang_cell_bytes(spec, tensor: int, kv_bytes: int, version: str) -> float:
    """Bytes of SGLang's pool per token on one GPU (sglang.pool_cell_bytes): the full-attention
    (and MLA) layers' key and value, and the sliding-window layers' as that version counts them."""
    groups = kv_groups(spec, tensor, kv_bytes)
    sliding = sum(g.layers * g.page_bytes for g in groups if g.kind == "sliding") // BLOCK_TOKENS
    full = sum(g.layers * g.page_bytes for g in groups if g.kind != "sliding") // BLOCK_TOKENS
    return pool_cell_bytes(full, sliding, version)


def serve(model, card: Gpu, *, engine: str = "vllm", gpus: int | None = None, tensor: int | None = None,
          dtype: str | None = "bfloat16", kv_dtype: str | None = "auto", context: int | None = None, users: int = 1,
          utilization: float | None = None, max_num_batched_tokens: int | None = None,
          max_num_seqs: int | None = None, cpu_offload_gib: float = 0.0, shared_prefix: int = 0,
          layouts: bool = True, usage: str = "server", engine_version: str | None = None,
          enforce_eager: bool = False, kv_cache_memory_bytes: int | None = None,
          expert_parallel: bool = False) -> Deployment:
    """`users` sequences of `context` tokens (prompt and answer together: vLLM's
    --max-model-len, by default the model's positions) served by `engine` on `gpus` cards of
    one kind, `tensor` of them per copy of the model (the others are replicas). Scheduler limits
    left to None are vLLM's defaults for the card and the usage context (default_limits). dtype
    None: the checkpoint's own format when the engine runs it on the card, else bfloat16."""
    engine = check_engine(engine)
    spec = model.spec
    if spec is None or not spec.has_kv_cache or spec.kind != "decoder":
        raise CalculatorError(not_served_code(spec), model_type=getattr(spec, "model_type", "") or model.name[:40])
    if has_linear_layers(spec, model.config):
        raise CalculatorError("serve_linear_attention", model_type=spec.model_type[:40])
    zero_points = is_format(dtype) and quant_format(dtype).key == "awq-4bit"
    dtype, weights_format, dtype_source = serving_precision(model, card, engine, dtype, engine_version)
    if tensor is None:
        tensor = gpus or 1
    gpus = tensor if gpus is None else limits.check("gpus", gpus)
    tensor = check_degree(spec, tensor)
    if gpus % tensor:
        raise CalculatorError("serve_gpus_multiple", gpus=gpus, tensor=tensor)
    context = check_positions(spec, limits.check("context", spec.max_positions if context is None else context))
    users = limits.check("users", users)
    shared_prefix = check_count("shared prefix", shared_prefix, context, low=0)
    if isinstance(cpu_offload_gib, bool) or not isinstance(cpu_offload_gib, (int, float)) \
            or not 0 <= cpu_offload_gib <= MAX_OFFLOAD_GIB:
        raise CalculatorError("bad_offload", value=str(cpu_offload_gib)[:30], high=MAX_OFFLOAD_GIB)
    default_batched, default_seqs = default_limits(card.total_bytes, card.key, usage)
    # None: the engine's default; 0 is a value like any other, and refused (vLLM refuses it too)
    batched = limits.check("max_num_batched_tokens",
                           default_batched if max_num_batched_tokens is None else max_num_batched_tokens)
    seqs = min(limits.check("max_num_seqs", default_seqs if max_num_seqs is None else max_num_seqs), batched)
    engine_version = check_version(engine, engine_version)
    if kv_cache_memory_bytes is not None:
        kv_cache_memory_bytes = check_count("--kv-cache-memory-bytes", kv_cache_memory_bytes, MAX_KV_BYTES)
    options = VllmOptions(engine_version, bool(enforce_eager), kv_cache_memory_bytes, bool(expert_parallel),
                          weights_format, zero_points)
    if utilization is None:
        utilization = (VLLM_UTILIZATIONS[engine_version] if engine == "vllm"
                       else sglang_fraction(card.memory_bytes, tensor, engine_version, bool(spec.mla_expanded_dim),
                                            model.config, max_num_batched_tokens))
    utilization = check_fraction(utilization)
    kv_bytes = kv_element_bytes(dtype, kv_dtype)
    offload = round(cpu_offload_gib * GIB)

    replicas = gpus // tensor

    def replica(t: int) -> Replica:
        return _replica(model, card, engine, t, dtype, kv_bytes, context, utilization, batched, seqs, offload,
                        shared_prefix, options, replicas if t == tensor else 1)

    chosen = replica(tensor)
    total_sequences = chosen.sequences * replicas
    verdict, reason = _verdict(chosen, card, total_sequences, users, context)
    layout_rows = []
    if layouts:
        for t in tensor_sizes(spec):
            one = chosen if t == tensor else replica(t)
            needed = math.ceil(users / one.sequences) if one.starts else None
            layout_rows.append(Layout(t, one.weights_bytes_per_gpu, one.kv_pool_bytes_per_gpu, one.kv_tokens,
                                  one.sequences, needed, needed * t if needed else None))
    kv_name = "auto" if kv_dtype in (None, "", "auto") else {4: "float32", 2: "float16", 1: "float8"}[kv_bytes]
    return Deployment(engine, engine_version, card.key, gpus, tensor,
                      replicas, weights_format or dtype, kv_name, context, users, utilization, batched, seqs, card.total_bytes,
                      kv_bytes_per_token(spec, {4: "float32", 2: "bfloat16", 1: "float8"}[kv_bytes]), chosen,
                      total_sequences, verdict, reason, tuple(layout_rows), options.enforce_eager,
                      options.expert_parallel, options.kv_cache_memory_bytes, dtype_source)


def _verdict(replica: Replica, card: Gpu, sequences: int, users: int, context: int) -> tuple[str, str | None]:
    if replica.available_kv_bytes_per_gpu <= 0:
        return TOO_BIG, "no_cache_room"
    if replica.sequences < 1:
        return TOO_BIG, "context_exceeds_pool"
    if replica.memory_verdict == TOO_BIG:
        return TOO_BIG, "over_usable"
    if sequences < users:
        return TOO_BIG, "too_many_users"
    return (TIGHT if replica.memory_verdict == TIGHT else FITS), None


def tensor_sizes(spec) -> list[int]:
    """Tensor-parallel sizes up to 16 that divide the attention heads (and whose key/value
    heads divide, or are replicated evenly), as vLLM requires."""
    sizes = []
    for t in range(1, MAX_TENSOR + 1):
        try:
            check_degree(spec, t)
        except CalculatorError:
            continue
        sizes.append(t)
    return sizes


# -- llama.cpp's server -----------------------------------------------------------------------

@dataclass(frozen=True)
class LlamaCppCache:
    n_ctx: int  # the whole cache, in cells (tokens), shared by the slots
    tokens_per_slot: int  # the longest sequence one slot can hold
    layers_on_gpu: int
    gpu_bytes: int
    host_bytes: int
    slots: int = SERVER_SLOTS
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    unified: bool = True

    @property
    def total_bytes(self) -> int:
        return self.gpu_bytes + self.host_bytes

    def to_json(self) -> dict:
        """`serve --engine llama.cpp --json`: kv_cache_bytes is the whole buffer, the figure
        `llama-cpp` splits between the GPU and host memory."""
        return {"engine": "llama.cpp", "n_ctx": self.n_ctx, "tokens_per_slot": self.tokens_per_slot,
                "slots": self.slots, "unified": self.unified, "cache_type_k": self.cache_type_k,
                "cache_type_v": self.cache_type_v, "layers_on_gpu": self.layers_on_gpu,
                "kv_cache_bytes": self.total_bytes, "kv_gpu_bytes": self.gpu_bytes, "kv_host_bytes": self.host_bytes}


def llamacpp_cache(spec, n_ctx: int = 0, parallel: int = SERVER_SLOTS, cache_type_k: str = "f16",
                   cache_type_v: str = "f16", gpu_layers: int = 999, unified: bool = True,
                   swa_full: bool = False, config: dict | None = None) -> LlamaCppCache:
    """The KV buffer of `llama-server -c N -np P -ngl G` (llama_cpp.kv_cache, the one model of
    llama.cpp's cache; 0 = the model's training context). -ngl G puts the last G - 1 layers
    (and the output layer) on the GPU, with their cache; the others keep theirs in host memory."""
    if spec is None or spec.kind != "decoder" or not spec.has_kv_cache:
        raise CalculatorError("llama_cpp_decoder_only", kind=getattr(spec, "kind", "unknown"))
    cache = kv_cache(spec, n_ctx or spec.max_positions or 4096, cache_type_k, cache_type_v, parallel, unified,
                     swa_full, config)
    layers = len(cache.layer_bytes)
    if isinstance(gpu_layers, bool) or not isinstance(gpu_layers, int) or not 0 <= gpu_layers <= 999:
        raise CalculatorError("bad_size", name="-ngl", value=str(gpu_layers)[:30], high=999)
    on_gpu = min(layers, max(gpu_layers - 1, 0))
    gpu = sum(cache.layer_bytes[layers - on_gpu:]) if on_gpu else 0
    return LlamaCppCache(cache.n_ctx, cache.tokens_per_slot, on_gpu, gpu, cache.total_bytes - gpu, parallel,
                         cache_type_k, cache_type_v, unified)


# -- transformers without a serving engine ----------------------------------------------------

@dataclass(frozen=True)
class MultiGpu:
    """`batch` sequences of `context` tokens with transformers over `gpus` cards: the largest
    GPU's share under device_map="auto" (layers one after another, one GPU busy at a time) and
    under tp_plan="auto" (every matrix split, every GPU busy; None when the heads do not split)."""

    gpus: int
    device_map_weights: tuple[int, ...]
    device_map_cache: tuple[int, ...]
    device_map_peak_bytes: int
    device_map_verdict: str
    tp_weights_bytes: int | None
    tp_cache_bytes: int | None
    tp_peak_bytes: int | None
    tp_verdict: str | None
    activation_bytes: int
    weights_dtype: str = "bfloat16"  # what the GPUs hold: the format, or bfloat16 where it is dequantized
    weights_source: str = "as_asked"  # or "dequantized" (transformers_formats.loaded_precision)
    no_tensor_parallel: str | None = None  # "heads" (they do not divide) or "format" (priced for floats only)


def transformers_multi_gpu(model, card: Gpu, gpus: int, dtype: str = "bfloat16", batch: int = 1,
                           context: int = 4096) -> MultiGpu:
    """Weights from the exact count split as accelerate (device_map) or transformers'
    tensor-parallel plan would; the cache follows its layers (device_map) or its key/value
    heads (tp_plan); the activation peak of the forward (inference.py) is counted whole on
    every GPU, an upper bound where tp_plan splits the MLP's widening."""
    from calculator.serving.transformers_formats import loaded_precision, unit_bytes

    spec, summary = model.spec, model.summary
    gpus = check_count("number of GPUs", gpus, 64)
    held, why = loaded_precision(card, dtype)  # a format as its quantizer stores it (MXFP4 below 7.5: bfloat16)
    memory = inference_memory(summary, spec, batch, context, dtype=held)
    sizes = unit_bytes(model, held)
    stages = pipeline_split(summary, "bfloat16" if sizes else held, min(gpus, len(summary.units)), sizes)
    layer_bytes = sum(s.kinds.get("layers", 0) for s in stages) or 1
    caches = tuple(math.ceil(memory.kv_cache_bytes * s.kinds.get("layers", 0) / layer_bytes) for s in stages)
    weights = tuple(s.bytes for s in stages)
    act = memory.activation_peak_bytes
    budget = Budget(card)
    peaks = [w + c + act for w, c in zip(weights, caches)]
    worst = max(range(len(peaks)), key=peaks.__getitem__)
    map_verdict = budget.verdict_for(reserved_bytes(peaks[worst], weights[worst]))
    tp_weights = tp_cache = tp_peak = tp_verdict = None
    try:
        degree = check_degree(spec, gpus)
    except CalculatorError:
        degree = None
    if degree is not None and sizes is None:  # the tensor-parallel plan: float dtypes only
        tp_weights = tensor_parallel(summary, spec, held, degree).per_gpu_bytes
        groups = [g for g in spec.attention if not g.cross]
        heads = groups[0].kv_heads if groups else 1
        tp_cache = math.ceil(memory.kv_cache_bytes * kv_heads_per_gpu(spec, degree) / heads)
        tp_peak = tp_weights + tp_cache + act
        tp_verdict = budget.verdict_for(reserved_bytes(tp_peak, tp_weights))
    return MultiGpu(gpus, weights, caches, peaks[worst], map_verdict, tp_weights, tp_cache, tp_peak, tp_verdict, act,
                    held, why, "format" if sizes else ("heads" if degree is None else None))
