"""The GPU catalog: memory, bandwidth, throughput and interconnect of common cards, and the
card as a PyTorch process sees it: the total it is told, the memory its CUDA context takes
outside the caching allocator, and what is left for tensors (`usable_bytes`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
import statistics
import tomllib

from calculator.core.custom_gpu import custom_gpu, is_custom
from calculator.core.errors import CalculatorError

GPU_FILE = Path(__file__).resolve().parent / "gpus.toml"
# The catalog, one file per family of cards, read in this order (gpus.toml first: its cards and
# keys predate the others).
GPU_FILES = tuple(GPU_FILE.parent / name for name in ("gpus.toml", "gpus_datacentre.toml", "gpus_desk.toml",
                                                      "gpus_amd_apple.toml"))
# How pickers group the cards, in this order ("custom": a card the reader typed).
GROUPS = ("data-centre", "workstation", "consumer", "amd", "apple", "custom")


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
    group: str = "data-centre"  # one of GROUPS
    # "published" (a PyTorch total read in a public log), "rule" (reservation_mib), "same as <key>",
    # "macos" (Metal's default working set) or "custom" (typed by the reader)
    total_basis: str = "published"

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
        from calculator.core.cuda_context import context_for

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



# Spellings people type for the catalog's cards (case, spaces and dashes are ignored), beyond
# the key, the name and the name without its maker's words (NVIDIA, GeForce, Tesla, AMD Instinct).
ALIASES = {
    "teslat4": "t4", "a10": "a10", "a10g": "a10g", "p100": "p100", "teslap100": "p100",
    "v10032gb": "v100-32gb", "v10032": "v100-32gb", "v10016gb": "v100-16gb", "v10016": "v100-16gb",
    "a10040gb": "a100-40gb", "a100-40": "a100-40gb", "a10040": "a100-40gb", "a10040gbsxm": "a100-40gb",
    "a10080gb": "a100-80gb", "a10080": "a100-80gb", "a10080gbsxm": "a100-80gb", "a10080gbpcie": "a100-80gb-pcie", "a10040gbpcie": "a100-40gb-pcie",
    "h100": "h100", "h100sxm": "h100", "h10080gb": "h100", "h100sxm5": "h100", "h100pcie": "h100-pcie", "h100nvl": "h100-nvl",
    "h200": "h200", "h200sxm": "h200", "gh200": "gh200", "h20": "h20", "b200": "b200", "b300": "b300", "gb200": "gb200",
    "l40s": "l40s", "a40": "a40", "a30": "a30",
    "a4000": "rtx-a4000", "rtxa4000": "rtx-a4000", "a5000": "rtx-a5000", "rtxa5000": "rtx-a5000",
    "a6000": "rtx-a6000", "rtxa6000": "rtx-a6000", "rtx6000ada": "rtx6000-ada", "6000ada": "rtx6000-ada",
    "rtxpro6000": "rtx-pro-6000", "pro6000": "rtx-pro-6000", "rtxpro6000blackwell": "rtx-pro-6000",
    "3060": "rtx3060", "rtx3060": "rtx3060", "rtx306012gb": "rtx3060", "3080": "rtx3080", "rtx3080": "rtx3080",
    "3090": "rtx3090", "rtx3090": "rtx3090", "4060ti": "rtx4060ti-16gb", "rtx4060ti": "rtx4060ti-16gb",
    "rtx4060ti16gb": "rtx4060ti-16gb", "4070": "rtx4070", "rtx4070": "rtx4070", "4070tisuper": "rtx4070ti-super",
    "rtx4070tisuper": "rtx4070ti-super", "4080": "rtx4080", "rtx4080": "rtx4080", "4090": "rtx4090", "rtx4090": "rtx4090",
    "5060ti": "rtx5060ti-16gb", "rtx5060ti": "rtx5060ti-16gb", "rtx5060ti16gb": "rtx5060ti-16gb", "5070": "rtx5070",
    "rtx5070": "rtx5070", "5070ti": "rtx5070ti", "rtx5070ti": "rtx5070ti", "5080": "rtx5080", "rtx5080": "rtx5080",
    "5090": "rtx5090", "rtx5090": "rtx5090",
    "mi250x": "mi250x", "mi250": "mi250x", "mi300x": "mi300x", "mi300": "mi300x", "mi325x": "mi325x", "mi355x": "mi355x",
}
# Platforms people name instead of a card: (card, how many of them the platform gives).
PLATFORMS = {
    "colabt4": ("t4", 1), "colabl4": ("l4", 1), "colaba100": ("a100-40gb", 1), "colabh100": ("h100", 1),
    "kagglet4": ("t4", 1), "kaggle2t4": ("t4", 2), "kaggle2xt4": ("t4", 2),
    "kagglet4x2": ("t4", 2), "kaggledualt4": ("t4", 2), "kagglep100": ("p100", 1),
}
_MAKERS = ("nvidia", "geforce", "tesla", "amdinstinct", "amd", "instinct")


def _spelling(text: str) -> str:
    return "".join(ch for ch in str(text).lower() if ch.isalnum())


@lru_cache(maxsize=1)
def gpus() -> dict[str, Gpu]:
    """The catalog's cards by key, in GROUPS order and, inside a group, in the files' order."""
    cards: dict[str, Gpu] = {}
    for path in GPU_FILES:
        with open(path, "rb") as handle:
            cards.update({key: Gpu(key=key, **row) for key, row in tomllib.load(handle).items()})
    return {card.key: card for group in GROUPS for card in cards.values() if card.group == group}


def _without_makers(spelled: str) -> str:
    for maker in _MAKERS:
        spelled = spelled.replace(maker, "")
    return spelled


@lru_cache(maxsize=1)
def _spellings() -> dict[str, str]:
    """Every spelling the catalog answers to: aliases, keys, names and names without makers."""
    found = {}
    for key, card in gpus().items():
        for spelled in (_spelling(key), _spelling(card.name), _without_makers(_spelling(card.name))):
            found.setdefault(spelled, key)
    found.update(ALIASES)
    found.update({spelled: key for spelled, (key, _) in PLATFORMS.items()})
    return found


def gpu(key: str) -> Gpu:
    """A catalog card by its key or a common spelling (T4, 4090, "RTX 5090", "H100 PCIe",
    "Colab T4"), or a card the reader describes by its memory ("12GiB", "custom:12GiB:360GB/s":
    calculator/core/custom_gpu.py)."""
    cards = gpus()
    if isinstance(key, str) and key in cards:
        return cards[key]
    text = str(key).strip()[:80] if isinstance(key, str) else ""
    if is_custom(text):
        return custom_gpu(text, cards.values(), lambda card: reservation_mib(card.architecture, vendor(card)))
    spellings = _spellings()
    found = spellings.get(_spelling(text)) or spellings.get(_without_makers(_spelling(text)))
    if found is None:  # an ambiguous name ("A100": 40 or 80 GB?) lists the cards it could mean
        close = [k for k in cards if _spelling(text) and _spelling(text) in _spelling(k)]
        raise CalculatorError("unknown_gpu", gpu=text[:40], choices=", ".join(close or cards))
    return cards[found]


def gpu_count(key: str) -> int:
    """How many of the card a platform gives ("Kaggle 2xT4": 2); 1 for a card's own name."""
    return PLATFORMS.get(_spelling(key) if isinstance(key, str) else "", ("", 1))[1]


def vendor(card: Gpu) -> str:
    return "apple" if card.architecture == "apple" else "amd" if card.architecture.startswith("cdna") else "nvidia"


def reservation_mib(architecture: str, card_vendor: str) -> int:
    """What the driver keeps of nvidia-smi's total (ROCm's for AMD): the median over the cards
    whose PyTorch total was published, of the same architecture, else of the same vendor."""
    published = [c for c in gpus().values() if c.total_basis == "published" and vendor(c) == card_vendor]
    same = [c for c in published if c.architecture == architecture] or published
    return int(statistics.median(c.memory_mib - c.torch_total_mib for c in same))


# The link between a GPU and its host's memory, one direction, GB/s (PCIe: 16 GB/s per
# generation 3.0 x16 lane set, doubling with each generation). Offloaded weights cross it.
PCIE_GBS = {"PCIe 3.0 x16": 16.0, "PCIe 4.0 x16": 32.0, "PCIe 5.0 x16": 64.0}
# Host links no two GPUs share (x8 cards; Grace to its GPU: 900 GB/s both directions added).
HOST_ONLY_GBS = {"PCIe 4.0 x8": 16.0, "PCIe 5.0 x8": 32.0, "NVLink-C2C": 450.0}
# Each card's link to CPU memory, from the same datasheets as the catalog (Apple silicon has
# none: host_link). A test checks that every NVIDIA and AMD card is listed.
_LINKS_BY_CARD = {
    "PCIe 3.0 x16": ("t4", "p100", "v100-16gb", "v100-32gb"),
    "PCIe 4.0 x16": ("l4", "a10", "a10g", "a30", "a40", "l40s", "a100-40gb", "a100-40gb-pcie", "a100-80gb",
                     "a100-80gb-pcie", "mi250x", "rtx-a4000", "rtx-a5000", "rtx-a6000", "rtx6000-ada", "rtx3060",
                     "rtx3080", "rtx3090", "rtx4070", "rtx4070ti-super", "rtx4080", "rtx4090"),
    "PCIe 4.0 x8": ("rtx4060ti-16gb",),
    "PCIe 5.0 x16": ("h100", "h100-pcie", "h100-nvl", "h200", "h20", "b200", "b300", "mi300x", "mi325x", "mi355x",
                     "rtx-pro-6000", "rtx5070", "rtx5070ti", "rtx5080", "rtx5090"),
    "PCIe 5.0 x8": ("rtx5060ti-16gb",),
    "NVLink-C2C": ("gh200", "gb200"),
}
HOST_LINKS = {key: link for link, keys in _LINKS_BY_CARD.items() for key in keys}


def host_link(card: Gpu) -> tuple[str, float]:
    """(name, GB/s one direction) of the card's link to CPU memory. Apple silicon has none:
    the GPU reads the same memory, at the machine's bandwidth."""
    if card.architecture == "apple":
        return "unified memory", card.bandwidth_gbs
    name = HOST_LINKS.get(card.key, "PCIe 4.0 x16")
    return name, {**PCIE_GBS, **HOST_ONLY_GBS}[name]
