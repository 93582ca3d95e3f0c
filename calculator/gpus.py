"""The GPU catalog: memory, bandwidth, throughput and interconnect of common cards."""

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
    memory_mib: int
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
        return self.memory_mib * 2**20

    def matmul_tflops(self, dtype: str) -> float:
        """Dense tensor-core peak for weights and activations in this precision. Weight-only
        int4/int8 formats compute in 16 bits; a card without bf16 falls back to fp16."""
        if dtype == "float32":
            return self.fp32_tflops  # PyTorch leaves TF32 off for matmuls by default
        if dtype == "float8":
            return self.fp8_tflops or self.fp16_tflops
        if dtype == "bfloat16":
            return self.bf16_tflops or self.fp16_tflops
        return self.fp16_tflops


@lru_cache(maxsize=1)
def gpus() -> dict[str, Gpu]:
    with open(GPU_FILE, "rb") as handle:
        table = tomllib.load(handle)
    return {key: Gpu(key=key, **row) for key, row in table.items()}


def gpu(key: str) -> Gpu:
    try:
        return gpus()[key]
    except KeyError:
        raise CalculatorError("unknown_gpu", gpu=str(key)[:40], choices=", ".join(gpus())) from None


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
