"""The GPU catalog: memory, bandwidth, throughput and interconnect of common cards, and the
card as a PyTorch process sees it: the total it is told, the memory its CUDA context takes
outside the caching allocator, and what is left for tensors (`usable_bytes`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
import tomllib

from .errors import CalculatorError

GPU_FILE = Path(__file__).resolve().parent / "gpus.toml"


@dataclass(frozen=True)
class Gpu:
    key: str
    name: str
    nominal: str
    memory_mib: int  # what nvidia-smi shows as the card's total
    torch_total_mib: int  # the total a PyTorch process is told (its OOM messages' "total capacity")
    architecture: str
    total_source: str
    bandwidth_gbs: float  # GB/s, 10^9 bytes per second
    fp32_tflops: float  # CUDA cores, no tensor cores: PyTorch's float32 default
    tf32_tflops: float  # only if TF32 is switched on
    fp16_tflops: float
    bf16_tflops: float
    fp8_tflops: float
    int8_tops: float
    interconnect: str
    interconnect_gbs: float
    source: str

    @property
    def memory_bytes(self) -> int:
        """The card's total as nvidia-smi shows it (not what a process can use: usable_bytes)."""
        return self.memory_mib * 2**20

    @property
    def total_bytes(self) -> int:
        """What torch reports as the card's total, and OOM messages as its capacity."""
        return self.torch_total_mib * 2**20

    @property
    def context_bytes(self) -> int:
        """The CUDA context and the kernels a model loads, outside the caching allocator:
        calibrated by architecture from published out-of-memory messages (cuda_context.py)."""
        from .cuda_context import context_for

        return context_for(self.architecture).bytes

    @property
    def usable_bytes(self) -> int:
        """What the caching allocator of one process can reserve: the total less the context."""
        return self.total_bytes - self.context_bytes

    def matmul_tflops(self, dtype: str) -> float:
        """Dense peak for matrix products with weights and activations in this precision.
        Weight-only int4/int8 formats compute in 16 bits. A card without bfloat16 tensor cores
        (Turing: the T4 datasheet lists none, and cuBLAS has no bfloat16 tensor-core kernel
        before sm80) runs bfloat16 products on its CUDA cores, at the float32 rate."""
        if dtype == "float32":
            return self.fp32_tflops  # PyTorch leaves TF32 off for matmuls by default
        if dtype == "float8":
            return self.fp8_tflops or self.fp16_tflops
        if dtype == "bfloat16":
            return self.bf16_tflops or self.fp32_tflops
        return self.fp16_tflops

    @property
    def has_bf16_tensor_cores(self) -> bool:
        return self.bf16_tflops > 0



# Spellings people type for the catalog's cards (case, spaces and dashes are ignored).
ALIASES = {
    "t4": "t4", "teslat4": "t4", "l4": "l4", "a10g": "a10g", "a10": "a10g",
    "3090": "rtx3090", "rtx3090": "rtx3090", "geforcertx3090": "rtx3090",
    "4090": "rtx4090", "rtx4090": "rtx4090", "geforcertx4090": "rtx4090",
    "a10040gb": "a100-40gb", "a100-40": "a100-40gb", "a10040": "a100-40gb",
    "a10080gb": "a100-80gb", "a10080": "a100-80gb",
    "h100": "h100", "h100sxm": "h100", "h10080gb": "h100", "h200": "h200", "h200sxm": "h200",
    "mi300x": "mi300x", "mi300": "mi300x",
}


def _spelling(text: str) -> str:
    return "".join(ch for ch in str(text).lower() if ch.isalnum())


@lru_cache(maxsize=1)
def gpus() -> dict[str, Gpu]:
    with open(GPU_FILE, "rb") as handle:
        table = tomllib.load(handle)
    return {key: Gpu(key=key, **row) for key, row in table.items()}


def gpu(key: str) -> Gpu:
    """A catalog card by its key or a common spelling (T4, 4090, A100-80GB, "H100 SXM")."""
    cards = gpus()
    if isinstance(key, str) and key in cards:
        return cards[key]
    spelled = _spelling(key) if isinstance(key, str) else ""
    found = ALIASES.get(spelled) or next((k for k in cards if _spelling(k) == spelled or _spelling(cards[k].name) == spelled
                                          or _spelling(cards[k].name).removeprefix("nvidia") == spelled), None)
    if found is None:
        raise CalculatorError("unknown_gpu", gpu=str(key)[:40], choices=", ".join(cards))
    return cards[found]


# The link between a GPU and its host's memory, one direction, GB/s (PCIe: 16 GB/s per
# generation 3.0 x16 lane set, doubling with each generation). Offloaded weights cross it.
PCIE_GBS = {"PCIe 3.0 x16": 16.0, "PCIe 4.0 x16": 32.0, "PCIe 5.0 x16": 64.0}
# Host interface of each catalog card, from the same datasheets as gpus.toml.
HOST_LINKS = {"t4": "PCIe 3.0 x16", "l4": "PCIe 4.0 x16", "a10g": "PCIe 4.0 x16", "rtx3090": "PCIe 4.0 x16",
              "rtx4090": "PCIe 4.0 x16", "a100-40gb": "PCIe 4.0 x16", "a100-80gb": "PCIe 4.0 x16",
              "h100": "PCIe 5.0 x16", "h200": "PCIe 5.0 x16", "mi300x": "PCIe 5.0 x16"}


def host_link(card: Gpu) -> tuple[str, float]:
    """(name, GB/s one direction) of the card's link to CPU memory."""
    name = HOST_LINKS.get(card.key, "PCIe 4.0 x16")
    return name, PCIE_GBS[name]
