"""llama.cpp's `--n-cpu-moe N` for a mixture of experts: every layer on the GPU (`-ngl 999`)
except the routed experts of the first N layers, which stay in CPU memory.

Source (llama.cpp, common/arg.cpp and common/common.h): `--n-cpu-moe N` (`-ncmoe`) adds one
tensor-buffer override per layer i < N with the pattern `blk\\.i\\.ffn_(up|down|gate|gate_up)_(ch|)exps`,
which puts those tensors in a CPU buffer when the model loads; `--cpu-moe` does it for every
layer. Attention, norms, routers, shared experts, the output layer and the whole KV cache stay on
the GPU with `-ngl 999`, so the GPU computes everything but the routed experts of those layers.

Why it often beats `-ngl`: a token reads only the experts its router picks (experts_per_token of
n_experts), so the bytes left in slow CPU memory are read a few at a time, while `-ngl` leaves
whole layers (attention, their cache) there. Decoding time is the bytes read on each side over
that side's bandwidth, as in llama_cpp.decode_seconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from calculator.distributed.gguf_layout import GgufLayout


@dataclass(frozen=True)
class MoeSplit:
    """What `-ngl 999 --n-cpu-moe N` puts on each side."""

    n_cpu_moe: int
    gpu_weights_bytes: int
    gpu_kv_bytes: int
    gpu_compute_bytes: int
    cpu_weights_bytes: int  # the token embeddings and the experts of the first N layers
    seconds_per_token: float

    @property
    def gpu_bytes(self) -> int:
        return self.gpu_weights_bytes + self.gpu_kv_bytes + self.gpu_compute_bytes

    @property
    def cpu_bytes(self) -> int:
        return self.cpu_weights_bytes

    @property
    def tokens_per_second(self) -> float:
        return 1.0 / self.seconds_per_token

    def to_json(self) -> dict:
        return {**asdict(self), "gpu_bytes": self.gpu_bytes, "cpu_bytes": self.cpu_bytes,
                "tokens_per_second": self.tokens_per_second}


def moe_split(layout: GgufLayout, n_cpu_moe: int, gpu_gbs: float, cpu_gbs: float) -> MoeSplit:
    """The sides and the time per token for `--n-cpu-moe n_cpu_moe` (0 to every layer)."""
    n = max(0, min(int(n_cpu_moe), layout.layers))
    on_cpu = sum(layout.expert_bytes[:n])
    gpu_weights = sum(layout.layer_bytes) + layout.output_bytes - on_cpu
    compute = max(layout.logits_buffer_bytes, layout.layers_buffer_bytes)
    read = layout.layer_read_bytes or layout.layer_bytes
    cpu_read = sum(layout.expert_read_bytes[:n])
    gpu_read = sum(read) - cpu_read + layout.output_bytes + sum(layout.kv_bytes)
    seconds = gpu_read / (gpu_gbs * 1e9) + cpu_read / (cpu_gbs * 1e9)
    return MoeSplit(n, gpu_weights, sum(layout.kv_bytes), compute, layout.input_bytes + on_cpu, seconds)


def fewest_cpu_moe(layout: GgufLayout, limit_bytes: int, gpu_gbs: float, cpu_gbs: float) -> MoeSplit | None:
    """The smallest N whose GPU share stays within `limit_bytes` (the fastest, since each layer
    kept on the GPU is read at the card's bandwidth); None for a dense model or when even every
    expert in CPU memory leaves too much on the GPU."""
    if not layout.expert_bytes:
        return None
    for n in range(layout.layers + 1):
        side = moe_split(layout, n, gpu_gbs, cpu_gbs)
        if side.gpu_bytes <= limit_bytes:
            return side
    return None
