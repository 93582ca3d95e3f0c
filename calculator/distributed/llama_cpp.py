"""llama.cpp with part of the model on the GPU: how many layers `-ngl` (`--n-gpu-layers`) can
put there for a GGUF quantization type and a context, what sits on each side, and how much
slower decoding gets than with everything on the GPU.

Sources (llama.cpp, read at commit 0c1e5709, the one vendored in llama-cpp-python 0.3.36;
/work/research/serving/accounting.md section 3 cites the lines):
- Placement (src/llama-model.cpp, `load_tensors`): the model has n_layer repeating layers and
  one output layer, n_layer + 1 slots. `-ngl N` puts the last N slots on the GPU
  (`i_gpu_start = max(n_layer + 1 - N, 0)`): N = 1 is the output layer alone, N = n_layer + 1
  is everything. The token embeddings always stay in CPU memory ("there is very little
  benefit to offloading the input layer"); only one row per token is read from them. When the
  output matrix is tied to the embeddings, the output slot holds a copy of them.
- Tensor types: calculator/memory/quantization.py (llama-quant.cpp's rules): every matrix of the
  layers in the chosen type (with its fallback for rows that do not divide into blocks), the
  output matrix in Q6_K below Q8_0, one-dimensional tensors (norms, biases) and routers in
  F32. A "_M" or "_S" file mixes in a few larger types: real files are a few percent larger.
- KV cache (src/llama-kv-cache.cpp): one K and one V tensor per layer, on the device of its
  layer (`-ngl` layers keep theirs on the GPU, the others in CPU memory); each holds
  `n_ctx` cells of `ggml_row_size(type, n_kv_heads x head_dim)` bytes. `-c` is padded to a
  multiple of 256 (src/llama-context.cpp). Cache types f16 (the default), q8_0 (34 bytes per
  32 values), q4_0 (18 per 32); a quantized V cache needs flash attention. llama-server's
  default of 4 slots shares the `-c` cells between them (unified cache). Models that llama.cpp
  runs with sliding-window layers (Gemma 2 and 3, Command R7B, gpt-oss) give those layers
  `min(n_ctx, window x 4 + 512)` cells, padded to 256 (llama-kv-cache-iswa.cpp).
- Compute buffer (an estimate): llama.cpp reserves the graph of one micro-batch of 512 tokens
  (`-ub`, default 512). Where the output layer runs, its float32 logits and their input
  dominate: 512 x (vocabulary + hidden) x 4 bytes, which is Llama-3-8B's logged
  "CUDA0 compute buffer size = 258.50 MiB" to the byte. The layers' own work, with flash
  attention (llama.cpp's default where the backend supports it), is taken as the FFN's float32
  intermediates: 512 x (3 x FFN width + 2 x hidden) x 4 bytes. The host's own small compute
  buffer is left out. llama.cpp prints the real ones when it starts.
- Speed: decoding one token reads every weight once and the whole cache, memory-bound at small
  batch: the GPU's layers at the card's bandwidth, the CPU's at the host memory's. The default
  host bandwidth is dual-channel DDR5-4800, 2 x 8 bytes x 4.8 GT/s = 76.8 GB/s theoretical
  (JEDEC JESD79-5); real desktops reach 60 to 80% of it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import math

from calculator.core.errors import CalculatorError
from calculator.core.gpus import Gpu
from calculator.memory.quantization import FORMATS, gguf_bytes, gguf_head_type, is_router
from calculator.distributed.gguf_layout import GgufLayout

GGUF_TYPES = tuple(f.key for f in FORMATS if f.family == "gguf")
# --cache-type-k / --cache-type-v that llama.cpp accepts (common/arg.cpp kv_cache_types): values per
# block, bytes per block (ggml's block_q8_0 holds 32 int8 and a float16 scale: 34 bytes).
CACHE_TYPES = {"f16": (1, 2), "bf16": (1, 2), "f32": (1, 4), "q8_0": (32, 34), "q5_1": (32, 24),
               "q5_0": (32, 22), "q4_1": (32, 20), "q4_0": (32, 18)}
CONTEXT_PAD = 256  # GGML_PAD(n_ctx, 256)
UBATCH = 512  # -ub default
SERVER_SLOTS = 4  # llama-server's -np default (auto), unified cache
MAX_SLOTS = 256
DEFAULT_CPU_GBS = 76.8  # dual-channel DDR5-4800, theoretical
MAX_CONTEXT = 10_485_760
MAX_CPU_GBS = 10_000.0
# Architectures whose llama.cpp hparams set a sliding-window type (src/models/gemma2.cpp and
# the others: hparams.swa_type = LLAMA_SWA_TYPE_STANDARD). Others with a window in their config
# (Mistral-7B-v0.1, converted as `llama`; Qwen 2) get full-context cells on every layer.
SWA_FAMILIES = frozenset({"gemma2", "gemma3", "gemma3_text", "cohere2", "gpt_oss"})


def check_type(name: str) -> str:
    for key in GGUF_TYPES:
        if key.lower() == str(name).strip().lower():
            return key
    raise CalculatorError("unknown_gguf_type", name=str(name)[:30], choices=", ".join(GGUF_TYPES))


def check_cache_type(name: str) -> str:
    if name not in CACHE_TYPES:
        raise CalculatorError("unknown_cache_type", name=str(name)[:30], choices=", ".join(CACHE_TYPES))
    return name


def check_context(context: object) -> int:
    if isinstance(context, bool) or not isinstance(context, int) or not 1 <= context <= MAX_CONTEXT:
        raise CalculatorError("bad_size", name="context", value=str(context)[:30], high=MAX_CONTEXT)
    return context


def check_cpu_gbs(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_CPU_GBS:
        raise CalculatorError("bad_bandwidth", value=str(value)[:30], high=int(MAX_CPU_GBS))
    return float(value)


def padded_cells(context: int) -> int:
    return -(-context // CONTEXT_PAD) * CONTEXT_PAD


def row_bytes(cache_type: str, values: int) -> int:
    """ggml_row_size: a row of `values` numbers in a cache type."""
    per_block, size = CACHE_TYPES[cache_type]
    if values % per_block:
        raise CalculatorError("cache_type_rows", cache_type=cache_type, values=values, block=per_block)
    return values // per_block * size


def bytes_per_value(cache_type: str) -> float:
    """Bytes one cached number takes in a cache type, its block's scale included."""
    per_block, size = CACHE_TYPES[check_cache_type(cache_type)]
    return size / per_block


def _spread(total: int, parts: int) -> tuple[int, ...]:
    """`total` bytes over `parts` layers as evenly as integers allow (a model whose layers
    differ, such as a mixture of experts with dense first layers, gets their average)."""
    base, extra = divmod(total, parts)
    return tuple(base + (1 if i < extra else 0) for i in range(parts))


def swa_cells(window: int, n_ctx: int, slots: int, unified: bool, ubatch: int = UBATCH) -> int:
    """Cells of a sliding-window layer in one stream (llama-kv-cache-iswa.cpp):
    GGML_PAD(min(n_ctx, n_swa x (unified ? n_seq_max : 1) + n_ubatch), 256)."""
    return padded_cells(min(n_ctx, window * (slots if unified else 1) + ubatch))


@dataclass(frozen=True)
class KvCache:
    """The KV buffer llama.cpp allocates at start for `-c n_ctx -np slots`."""

    n_ctx: int  # cells of a full-attention layer, every stream together
    tokens_per_slot: int  # the longest sequence one slot can hold
    streams: int  # 1 with a unified cache (-kvu), else one per slot
    layer_bytes: tuple[int, ...]  # K and V of each layer, in model order

    @property
    def total_bytes(self) -> int:
        return sum(self.layer_bytes)


def kv_cache(spec, context: int, cache_type_k: str = "f16", cache_type_v: str = "f16", slots: int = SERVER_SLOTS,
             unified: bool = True, swa_full: bool = False, config: dict | None = None) -> KvCache:
    """llama.cpp's cache over the layers of kv_layers.cache_layers: `context` (-c) padded to
    256 cells, shared by the slots (unified) or split into one stream per slot; a sliding
    layer keeps swa_cells per stream when llama.cpp runs the architecture with sliding-window
    attention (SWA_FAMILIES) and --swa-full is off; MLA keeps its latent in K and no V; a
    linear-attention layer (config's layer_types) keeps one float32 state per slot."""
    from calculator.memory.kv_layers import cache_layers

    cache_type_k, cache_type_v = check_cache_type(cache_type_k), check_cache_type(cache_type_v)
    if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= MAX_SLOTS:
        raise CalculatorError("bad_size", name="-np", value=str(slots)[:30], high=MAX_SLOTS)
    context = check_context(context)
    if unified:
        n_ctx = per_slot = padded_cells(context)
        streams = 1
    else:
        per_slot = padded_cells(-(-context // slots))
        n_ctx, streams = per_slot * slots, slots
    swa = spec.model_type in SWA_FAMILIES and not swa_full
    sizes = []
    for layer in cache_layers(spec, config):
        if layer.kind == "linear":  # llama_memory_recurrent: r and s in F32, one cell per sequence
            sizes.append(slots * 4 * ((layer.conv_kernel - 1) * layer.conv_channels + layer.state_values))
            continue
        cells = n_ctx
        if layer.kind == "sliding" and swa:
            cells = streams * swa_cells(layer.window, per_slot, slots, unified)
        sizes.append(cells * (row_bytes(cache_type_k, layer.k_values)
                              + (row_bytes(cache_type_v, layer.v_values) if layer.v_values else 0)))
    return KvCache(n_ctx, per_slot, streams, tuple(sizes))


def _kv_per_layer(spec, context: int, cache_type: str, config: dict | None = None) -> tuple[int, ...]:
    """K and V bytes of each layer under llama-server's defaults (4 slots, unified cache)."""
    sizes = kv_cache(spec, context, cache_type, cache_type, config=config).layer_bytes
    if len(sizes) != spec.layers:  # layers without a cache (or not described): spread the total
        return _spread(sum(sizes), spec.layers)
    return sizes


def gguf_layout(summary, spec, gguf_type: str, context: int, cache_type: str = "f16",
                config: dict | None = None) -> GgufLayout:
    """Bytes of each part of a decoder in one GGUF type, for a context of `context` tokens."""
    gguf_type = check_type(gguf_type)
    cache_type = check_cache_type(cache_type)
    context = check_context(context)
    if spec is None or spec.kind != "decoder" or not spec.layers or not spec.hidden:
        raise CalculatorError("llama_cpp_decoder_only", kind=getattr(spec, "kind", "unknown"))
    head_type = gguf_head_type(gguf_type, summary, spec)
    layers_weights = 0
    experts_weights = 0
    output_matrix = 0
    tied = False
    for matrix in summary.linears:
        if matrix.kind == "tied-head":
            tied = True
        elif matrix.kind == "head":
            output_matrix += matrix.count * gguf_bytes(head_type, matrix.out_features, matrix.in_features)
        elif is_router(matrix, spec):
            layers_weights += 4 * matrix.parameters  # F32
        else:
            size = matrix.count * gguf_bytes(gguf_type, matrix.out_features, matrix.in_features)
            layers_weights += size
            experts_weights += size if matrix.kind == "experts" else 0
    one_dim = summary.groups.get("norm", 0) + summary.groups.get("bias", 0)
    final_norm = spec.hidden if summary.groups.get("norm", 0) >= spec.hidden else 0
    layers_weights += 4 * (one_dim - final_norm)  # F32
    embedding = summary.groups.get("embedding", 0)
    rows = embedding // spec.hidden
    vocab_rows = min(spec.vocab, rows) if spec.vocab else rows
    # tied: the file's token_embd is in the output's type and the output slot copies it
    input_type = head_type if tied else gguf_type
    input_bytes = gguf_bytes(input_type, vocab_rows, spec.hidden) + gguf_bytes(gguf_type, rows - vocab_rows, spec.hidden)
    copy = gguf_bytes(head_type, vocab_rows, spec.hidden) if tied else 0
    output_bytes = (output_matrix or copy) + 4 * final_norm
    cells = padded_cells(context)
    # decoding one token reads the experts its router picks: experts_per_token of experts
    unread = experts_weights - experts_weights * spec.experts_per_token // spec.experts if spec.experts else 0
    ffn = (spec.expert_intermediate * spec.experts_per_token + spec.shared_expert_intermediate
           if spec.experts else spec.intermediate) or 4 * spec.hidden
    return GgufLayout(
        gguf_type, head_type, cache_type, context, cells, _spread(layers_weights, spec.layers),
        _kv_per_layer(spec, context, cache_type, config), input_bytes, output_bytes,
        UBATCH * (spec.vocab + spec.hidden) * 4, UBATCH * (3 * ffn + 2 * spec.hidden) * 4,
        copy if not output_matrix else 0, _spread(layers_weights - unread, spec.layers),
        _spread(experts_weights, spec.layers) if experts_weights else (),
        _spread(experts_weights - unread, spec.layers) if experts_weights else ())


@dataclass(frozen=True)
class Split:
    """What `-ngl` puts on each side."""

    ngl: int
    gpu_layers: int  # repeating layers on the GPU (the last ones)
    output_on_gpu: bool
    gpu_weights_bytes: int
    gpu_kv_bytes: int
    gpu_compute_bytes: int
    cpu_weights_bytes: int  # the token embeddings and the layers left on the CPU (and the output)
    cpu_kv_bytes: int
    cpu_compute_bytes: int

    @property
    def gpu_bytes(self) -> int:
        return self.gpu_weights_bytes + self.gpu_kv_bytes + self.gpu_compute_bytes

    @property
    def cpu_bytes(self) -> int:
        return self.cpu_weights_bytes + self.cpu_kv_bytes + self.cpu_compute_bytes

    def to_json(self) -> dict:
        return {**asdict(self), "gpu_bytes": self.gpu_bytes, "cpu_bytes": self.cpu_bytes}


def split(layout: GgufLayout, ngl: int) -> Split:
    """The sides for `-ngl ngl`: the last ngl - 1 layers and the output layer on the GPU."""
    slots = layout.layers + 1
    ngl = max(0, min(int(ngl), slots))
    output_on_gpu = ngl >= 1
    gpu_layers = max(ngl - 1, 0)
    first_gpu = layout.layers - gpu_layers
    gpu_w = sum(layout.layer_bytes[first_gpu:]) + (layout.output_bytes if output_on_gpu else 0)
    cpu_w = layout.input_bytes + sum(layout.layer_bytes[:first_gpu]) + (0 if output_on_gpu else layout.output_bytes)
    gpu_kv = sum(layout.kv_bytes[first_gpu:])
    cpu_kv = sum(layout.kv_bytes[:first_gpu])
    if output_on_gpu:
        gpu_compute, cpu_compute = max(layout.logits_buffer_bytes, layout.layers_buffer_bytes), 0
    else:
        gpu_compute, cpu_compute = 0, max(layout.logits_buffer_bytes, layout.layers_buffer_bytes)
    return Split(ngl, gpu_layers, output_on_gpu, gpu_w, gpu_kv, gpu_compute, cpu_w, cpu_kv, cpu_compute)


def largest_ngl(layout: GgufLayout, limit_bytes: int) -> int:
    """The largest -ngl whose GPU share stays within `limit_bytes` (0 when not even the
    output layer and its buffer fit)."""
    for ngl in range(layout.layers + 1, 0, -1):
        if split(layout, ngl).gpu_bytes <= limit_bytes:
            return ngl
    return 0


def decode_seconds(layout: GgufLayout, side: Split, gpu_gbs: float, cpu_gbs: float) -> tuple[float, float]:
    """(seconds per generated token with this split, with everything on the GPU): the weights
    of every layer (of a mixture of experts, the experts a token uses) and of the output, and
    the whole cache, read once per token (the token embeddings: one row, left out)."""
    first_gpu = layout.layers - side.gpu_layers
    read = layout.layer_read_bytes or layout.layer_bytes
    output = (layout.output_bytes, 0) if side.output_on_gpu else (0, layout.output_bytes)
    gpu_read = sum(read[first_gpu:]) + output[0] + side.gpu_kv_bytes
    cpu_read = sum(read[:first_gpu]) + output[1] + side.cpu_kv_bytes
    every = sum(read) + layout.output_bytes + sum(layout.kv_bytes)
    return gpu_read / (gpu_gbs * 1e9) + cpu_read / (cpu_gbs * 1e9), every / (gpu_gbs * 1e9)


@dataclass(frozen=True)
class LlamaCppPlan:
    layout: GgufLayout
    split: Split
    limit_bytes: int  # the GPU share that fits (calculator.core.budget: usable memory less the headroom)
    usable_bytes: int
    gpu: str
    cpu_gbs: float
    seconds_per_token: float
    all_on_gpu_seconds: float
    moe: object | None = None  # llama_cpp_moe.MoeSplit: the fewest --n-cpu-moe that fits (MoE models)

    @property
    def better(self) -> str:
        """"n-cpu-moe" when keeping some experts in CPU memory decodes faster than -ngl's split."""
        return "n-cpu-moe" if self.moe is not None and self.moe.seconds_per_token < self.seconds_per_token else "ngl"

    @property
    def ngl(self) -> int:
        return self.split.ngl

    @property
    def all_on_gpu(self) -> bool:
        return self.ngl == self.layout.layers + 1

    @property
    def slowdown(self) -> float:
        return self.seconds_per_token / self.all_on_gpu_seconds if self.all_on_gpu_seconds else 1.0

    @property
    def tokens_per_second(self) -> float:
        return 1.0 / self.seconds_per_token if self.seconds_per_token else math.inf

    def command(self, model_file: str = "model.gguf", flag: str | None = None) -> str:
        """The command for the better of the two ways (or the one named)."""
        if (flag or self.better) == "n-cpu-moe":
            words = ["llama-server", "-m", model_file, "-ngl", "999", "--n-cpu-moe", str(self.moe.n_cpu_moe)]
        else:
            words = ["llama-server", "-m", model_file, "-ngl", str(self.ngl)]
        words += ["-c", str(self.layout.context)]
        if self.layout.cache_type != "f16":
            words += ["-fa", "on", "--cache-type-k", self.layout.cache_type, "--cache-type-v", self.layout.cache_type]
        return " ".join(words)

    def to_json(self) -> dict:
        return {"type": self.layout.type, "head_type": self.layout.head_type, "cache_type": self.layout.cache_type,
                "context": self.layout.context, "cells": self.layout.cells, "layers": self.layout.layers,
                "ngl": self.ngl, "all_on_gpu": self.all_on_gpu, "gpu": self.gpu, "limit_bytes": self.limit_bytes,
                "usable_bytes": self.usable_bytes, **self.split.to_json(), "layout": self.layout.to_json(),
                "cpu_gbs": self.cpu_gbs, "seconds_per_token": self.seconds_per_token,
                "all_on_gpu_seconds": self.all_on_gpu_seconds, "slowdown": self.slowdown,
                "tokens_per_second": self.tokens_per_second, "command": self.command(),
                "ngl_command": self.command(flag="ngl"), "better": self.better,
                "n_cpu_moe": self.moe.to_json() if self.moe is not None else None}


def plan_llama_cpp(summary, spec, card: Gpu, gguf_type: str, context: int, cache_type: str = "f16",
                   cpu_gbs: float = DEFAULT_CPU_GBS, config: dict | None = None) -> LlamaCppPlan:
    """The largest -ngl for this card (Budget's limit: usable memory less the 5% headroom),
    what each side holds, and the decoding speed against everything on the GPU; for a mixture
    of experts, also the fewest --n-cpu-moe that fits, and which of the two decodes faster."""
    from calculator.core.budget import Budget

    cpu_gbs = check_cpu_gbs(cpu_gbs)
    layout = gguf_layout(summary, spec, gguf_type, context, cache_type, config)
    budget = Budget(card)
    best = split(layout, largest_ngl(layout, budget.limit_bytes))
    seconds, reference = decode_seconds(layout, best, card.bandwidth_gbs, cpu_gbs)
    from calculator.distributed.llama_cpp_moe import fewest_cpu_moe

    moe = fewest_cpu_moe(layout, budget.limit_bytes, card.bandwidth_gbs, cpu_gbs)
    return LlamaCppPlan(layout, best, budget.limit_bytes, budget.usable_bytes, card.key, cpu_gbs, seconds, reference,
                        moe)

