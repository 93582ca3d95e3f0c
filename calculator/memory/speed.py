"""How fast: a roofline model of inference and of data-parallel work.

A step takes at least the time to read what it needs from GPU memory (bytes / bandwidth)
and at least the time to do its arithmetic (FLOPs / peak throughput); the larger of the two
is the estimate, and it says which one bounds the step. Decoding one token per sequence
reads every weight for very little arithmetic: memory-bound, so larger batches are nearly
free until compute catches up. A long prompt is compute-bound. Peaks are the datasheet's:
these are best cases; real kernels reach roughly 50-80% of them.
Sources: NVIDIA datasheets (gpus.toml); kipply, "Transformer inference arithmetic" (2022);
Kaplan et al., "Scaling laws for neural language models" (2020) for 2N / 6N FLOPs per token.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import math

from calculator.core.memo import kept_by_inputs
from calculator.models.architecture import ArchSpec
from calculator.core.gpus import Gpu
from calculator.memory.inference import compute_dtype, kv_cache_bytes, kv_dtype_for
from calculator.core.precision import bytes_per_param, normalize_dtype
from calculator.models.summary import ModelSummary


@dataclass(frozen=True)
class StepCost:
    seconds: float
    memory_seconds: float
    compute_seconds: float
    bytes_moved: int
    flops: float

    @property
    def bound(self) -> str:
        return "memory" if self.memory_seconds >= self.compute_seconds else "compute"

    def to_json(self) -> dict:
        return {**asdict(self), "bound": self.bound}


def _cost(bytes_moved: int, flops: float, gpu: Gpu, dtype: str) -> StepCost:
    memory = bytes_moved / (gpu.bandwidth_gbs * 1e9)
    compute = flops / (gpu.matmul_tflops(_product_dtype(dtype)) * 1e12)
    return StepCost(max(memory, compute), memory, compute, bytes_moved, flops)


def _product_dtype(dtype: str) -> str:
    """The dtype the matrix products run in: weight-only formats (int8/int4 shorthands, GPTQ,
    AWQ, bitsandbytes) compute in 16 bits; float8 and the 16/32-bit dtypes in their own."""
    from calculator.memory.quantization import is_format

    if is_format(dtype):
        return "float8" if dtype.startswith("fp8") else "bfloat16"
    return compute_dtype(dtype) if dtype in ("int8", "int4") else dtype


@kept_by_inputs(maxsize=256)  # the same few a model; a simulated run asks for them at every step
def _weight_bytes(summary: ModelSummary, spec: ArchSpec, dtype: str) -> tuple[int, float]:
    """(every weight's bytes, bytes per expert parameter) in a dtype or a real format."""
    from calculator.memory.inference import weights_of

    total = weights_of(summary, spec, dtype)[0]
    per_parameter = total / max(summary.parameters, 1)
    return total, per_parameter


def _is_format(dtype: str) -> bool:
    from calculator.memory.quantization import is_format

    return is_format(dtype)


def _dtype(dtype: str) -> str:
    return dtype.strip().lower() if _is_format(dtype) else normalize_dtype(dtype)


def active_parameters(summary: ModelSummary) -> int:
    return summary.active_parameters or summary.parameters


def weight_bytes_read(summary: ModelSummary, spec: ArchSpec, dtype: str, tokens: int) -> int:
    """Weight bytes a step over `tokens` tokens reads. In a mixture of experts a layer reads
    only the experts its tokens were routed to: with uniform routing of k of E experts, a
    fraction 1 - (1 - k/E)^tokens of them."""
    total, per_parameter = _weight_bytes(summary, spec, dtype)
    expert_params = summary.groups.get("experts", 0)
    if not (spec.experts and spec.experts_per_token and expert_params):
        return total
    touched = 1 - (1 - spec.experts_per_token / spec.experts) ** tokens
    expert_bytes = expert_params * (bytes_per_param(dtype) if not _is_format(dtype) else per_parameter)
    return math.ceil(total - expert_bytes + expert_bytes * touched)


def attention_flops(spec: ArchSpec, queries: int, keys: int) -> float:
    """Scores (Q K^T) and weighted sum (A V): 2 x 2 x layers x heads x head size per pair."""
    return 4.0 * spec.layers * spec.heads * spec.head_dim * queries * keys


def decode_step(summary: ModelSummary, spec: ArchSpec, gpu: Gpu, dtype: str, batch: int, context: int,
                kv_dtype: str | None = None) -> StepCost:
    """One new token for each of `batch` sequences that already hold `context` tokens."""
    dtype = _dtype(dtype)
    moved = weight_bytes_read(summary, spec, dtype, batch)
    moved += kv_cache_bytes(spec, batch, context, kv_dtype_for(dtype, kv_dtype))
    flops = batch * (2.0 * active_parameters(summary) + attention_flops(spec, 1, context))
    return _cost(moved, flops, gpu, dtype)


def prefill(summary: ModelSummary, spec: ArchSpec, gpu: Gpu, dtype: str, batch: int, prompt: int,
            kv_dtype: str | None = None) -> StepCost:
    """The forward over every prompt token at once (causal: each token sees those before)."""
    dtype = _dtype(dtype)
    moved = weight_bytes_read(summary, spec, dtype, batch * prompt)
    moved += kv_cache_bytes(spec, batch, prompt, kv_dtype_for(dtype, kv_dtype))
    flops = batch * (2.0 * active_parameters(summary) * prompt + attention_flops(spec, prompt, prompt) / 2)
    return _cost(moved, flops, gpu, dtype)


def forward_pass(summary: ModelSummary, spec: ArchSpec, gpu: Gpu, dtype: str, batch: int, tokens: int) -> StepCost:
    """One forward over `batch` sequences of `tokens` for a model that does not generate (an
    encoder or a classifier): every weight read once, 2 FLOPs per parameter per token, and
    attention where every token sees every other (bidirectional)."""
    dtype = _dtype(dtype)
    moved = weight_bytes_read(summary, spec, dtype, batch * tokens)
    flops = batch * (2.0 * active_parameters(summary) * tokens + attention_flops(spec, tokens, tokens))
    return _cost(moved, flops, gpu, dtype)


@dataclass(frozen=True)
class Generation:
    batch: int
    prompt: int
    new_tokens: int
    time_to_first_token: float  # the prefill
    time_per_token: float  # one decoding step, at the middle of the answer
    total_seconds: float
    tokens_per_second: float  # generated tokens, all sequences together
    decode_bound: str

    def to_json(self) -> dict:
        return asdict(self)


def generation(summary: ModelSummary, spec: ArchSpec, gpu: Gpu, dtype: str, batch: int, prompt: int,
               new_tokens: int, kv_dtype: str | None = None) -> Generation:
    """Prefill then `new_tokens` decoding steps; the cache grows along the answer, so the
    step at its middle stands for the average."""
    first = prefill(summary, spec, gpu, dtype, batch, prompt, kv_dtype)
    step = decode_step(summary, spec, gpu, dtype, batch, prompt + new_tokens // 2, kv_dtype)
    total = first.seconds + new_tokens * step.seconds
    return Generation(batch, prompt, new_tokens, first.seconds, step.seconds, total,
                      batch * new_tokens / total, step.bound)


# Data parallelism ------------------------------------------------------------------------

NETWORKS_GBS = {  # per GPU, one direction, GB/s
    "InfiniBand NDR 400 Gb/s": 50.0,
    "InfiniBand HDR 200 Gb/s": 25.0,
    "Ethernet 100 Gb/s": 12.5,
    "Ethernet 25 Gb/s": 3.125,
}


@dataclass(frozen=True)
class DataParallel:
    gpus: int
    nodes: int
    seconds: float
    compute_seconds: float
    communication_seconds: float  # per step, the part not hidden behind the backward pass
    steps: int
    speedup: float

    def to_json(self) -> dict:
        return asdict(self)


def ring_allreduce_seconds(size_bytes: int, gpus: int, link_gbs: float) -> float:
    """A ring all-reduce sends 2 (k - 1) / k of the buffer through each GPU's link."""
    if gpus <= 1:
        return 0.0
    return 2 * (gpus - 1) / gpus * size_bytes / (link_gbs * 1e9)


def data_parallel_training(summary: ModelSummary, gpu: Gpu, samples: int, tokens_per_sample: int,
                           gpus_per_node: int, nodes: int, network: str, micro_batch: int = 1,
                           dtype: str = "bfloat16", utilisation: float = 0.4) -> DataParallel:
    """One epoch of training with plain data parallelism: every GPU holds the model, works on
    its own micro-batches, then the gradients are averaged by an all-reduce that overlaps the
    backward pass (as PyTorch DDP does). Compute: 6 FLOPs per parameter per token, at
    `utilisation` of the peak (30-50% is typical for large-model training)."""
    gpus = gpus_per_node * nodes
    steps = math.ceil(samples / (micro_batch * gpus))
    tokens = micro_batch * tokens_per_sample
    compute = 6.0 * active_parameters(summary) * tokens / (gpu.matmul_tflops(dtype) * 1e12 * utilisation)
    link = gpu.interconnect_gbs / 2 if nodes == 1 else min(gpu.interconnect_gbs / 2, NETWORKS_GBS[network])
    grads = math.ceil(summary.parameters * bytes_per_param(dtype))
    comm = ring_allreduce_seconds(grads, gpus, link)
    exposed = max(0.0, comm - compute * 2 / 3)  # the backward is about 2/3 of the step
    seconds = steps * (compute + exposed)
    single = math.ceil(samples / micro_batch) * compute
    return DataParallel(gpus, nodes, seconds, compute, exposed, steps, single / seconds)


def data_parallel_inference(generation_result: Generation, samples: int, gpus: int) -> float:
    """Seconds to answer `samples` prompts on `gpus` GPUs each running batches of the same
    size: no communication at all, so the time divides by the number of GPUs."""
    per_batch = generation_result.total_seconds
    return math.ceil(samples / (generation_result.batch * gpus)) * per_batch
