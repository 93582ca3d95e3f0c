"""CPU offloading: which modules go to the GPUs, the CPU and the disk for given budgets,
computed by accelerate's own `infer_auto_device_map` on the model built on the meta device,
and what streaming the offloaded weights costs at every forward pass.

`from_pretrained(device_map="auto", max_memory=...)` in transformers 5 balances the budget
over several GPUs (accelerate's `get_balanced_memory`) and then calls the same placement;
with one GPU the budget is used as given. The plan here does exactly that (checked against
transformers' own code path in tests/test_offload.py).

Offloaded weights stay in CPU memory (or on disk, memory-mapped) and accelerate's hooks copy
each offloaded layer to the GPU just before it runs, at every forward pass, so for every
generated token. The copies are not overlapped with computation, so their time adds up.
Sources: accelerate's big-model inference guide; PCIe bandwidths from PCI-SIG (16, 32 and
64 GB/s per direction for x16 links of generations 3, 4 and 5); an NVMe drive on PCIe 4.0
reads about 7 GB/s at best (e.g. the Samsung 990 PRO datasheet).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass
import json
import logging
import math

from .errors import CalculatorError
from .gpus import Gpu, host_link
from .precision import FLOAT_DTYPES, normalize_dtype

DISK_GBS = 7.0
MAX_GPUS = 16
MAX_BUDGET_BYTES = 2**50  # one pebibyte: protects the arithmetic, not the user


def build_meta_model(config: dict, dtype: str, model_class: str = "auto"):
    """The model on the meta device in `dtype` (floating tensors created in it, as
    from_pretrained(dtype=...) creates them), for accelerate's placement."""
    import torch

    from .meta import _quiet, make_config, model_constructor

    dtype = _check_dtype(dtype)
    cfg = make_config(config)
    construct = model_constructor(cfg, model_class)
    try:
        with _quiet(), torch.device("meta"):
            return construct(cfg, getattr(torch, dtype))
    except CalculatorError:
        raise
    except Exception as exc:
        detail = " ".join(str(exc).strip().splitlines()[:2])[:240]
        raise CalculatorError("build_failed", architecture=type(cfg).__name__, detail=detail) from None


def _check_dtype(dtype: str) -> str:
    dtype = normalize_dtype(dtype)
    if dtype not in FLOAT_DTYPES:
        raise CalculatorError("offload_dtype", dtype=dtype, choices=", ".join(FLOAT_DTYPES))
    return dtype


def _check_budget(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_BUDGET_BYTES:
        raise CalculatorError("bad_budget", name=name, value=str(value)[:30])
    return value


def max_memory_for(gpu_budgets: list[int], cpu_budget: int) -> dict:
    if not 1 <= len(gpu_budgets) <= MAX_GPUS:
        raise CalculatorError("bad_size", name="number of GPUs", value=len(gpu_budgets), high=MAX_GPUS)
    memory: dict = {i: _check_budget("GPU memory", b) for i, b in enumerate(gpu_budgets)}
    memory["cpu"] = _check_budget("CPU memory", cpu_budget)
    return memory


@dataclass(frozen=True)
class DevicePlan:
    device_map: dict  # module name -> 0, 1, ..., "cpu" or "disk", in model order
    max_memory: dict  # the budgets accelerate placed against (balanced over GPUs)
    bytes_by_device: dict  # "0", "1", ..., "cpu", "disk" -> bytes placed there
    total_bytes: int
    dtype: str

    @property
    def gpu_bytes(self) -> int:
        return sum(v for k, v in self.bytes_by_device.items() if k not in ("cpu", "disk"))

    @property
    def cpu_bytes(self) -> int:
        return self.bytes_by_device.get("cpu", 0)

    @property
    def disk_bytes(self) -> int:
        return self.bytes_by_device.get("disk", 0)

    def to_json(self) -> dict:
        return {"device_map": {k: v for k, v in self.device_map.items()},
                "max_memory": {str(k): v for k, v in self.max_memory.items()},
                "bytes_by_device": dict(self.bytes_by_device), "total_bytes": self.total_bytes,
                "gpu_bytes": self.gpu_bytes, "cpu_bytes": self.cpu_bytes, "disk_bytes": self.disk_bytes,
                "dtype": self.dtype}


class _quiet_accelerate:
    """accelerate warns that GPU 0 does not exist on a machine without one: we plan for the
    reader's GPUs, not ours."""

    def __enter__(self):
        self._logger = logging.getLogger("accelerate")
        self._level = self._logger.level
        self._logger.setLevel(logging.ERROR)
        return self

    def __exit__(self, *exc):
        self._logger.setLevel(self._level)
        return False


def plan_device_map(model, gpu_budgets: list[int], cpu_budget: int, dtype: str) -> DevicePlan:
    """What `from_pretrained(device_map="auto", max_memory=...)` places where."""
    from accelerate import infer_auto_device_map
    from accelerate.utils import compute_module_sizes, get_balanced_memory

    dtype = _check_dtype(dtype)
    memory = max_memory_for(gpu_budgets, cpu_budget)
    no_split = list(getattr(model, "_no_split_modules", None) or [])
    with _quiet_accelerate():
        if sum(1 for k, v in memory.items() if k != "cpu" and v > 0) > 1:
            memory = get_balanced_memory(model, max_memory=dict(memory), no_split_module_classes=no_split)
        device_map = infer_auto_device_map(model, max_memory=dict(memory), no_split_module_classes=no_split)
    sizes = compute_module_sizes(model)
    placed: dict[str, int] = OrderedDict()
    for name, device in device_map.items():
        key = str(device)
        placed[key] = placed.get(key, 0) + sizes[name]
    return DevicePlan(OrderedDict(device_map), dict(memory), dict(placed), sizes[""], dtype)


@dataclass(frozen=True)
class OffloadCost:
    gpu_seconds: float  # reading the weights held on the GPUs
    cpu_seconds: float  # copying the CPU-held weights over PCIe
    disk_seconds: float  # reading the disk-held weights, then copying them
    all_on_gpu_seconds: float  # the same weights read from GPU memory, had they fitted
    link: str
    link_gbs: float

    @property
    def seconds(self) -> float:
        return self.gpu_seconds + self.cpu_seconds + self.disk_seconds

    @property
    def slowdown(self) -> float:
        return self.seconds / self.all_on_gpu_seconds if self.all_on_gpu_seconds else 1.0

    def to_json(self) -> dict:
        return {**asdict(self), "seconds": self.seconds, "slowdown": self.slowdown}


def forward_cost(plan: DevicePlan, card: Gpu) -> OffloadCost:
    """Time to get every weight to the compute units once, i.e. one decoding step at small
    batch (memory-bound): GPU-held weights at the card's bandwidth, CPU-held ones over the
    host link, disk-held ones from the drive and then over the link."""
    name, link = host_link(card)
    gpu_bw = card.bandwidth_gbs * 1e9
    return OffloadCost(
        gpu_seconds=plan.gpu_bytes / gpu_bw,
        cpu_seconds=plan.cpu_bytes / (link * 1e9),
        disk_seconds=plan.disk_bytes / (DISK_GBS * 1e9) + plan.disk_bytes / (link * 1e9),
        all_on_gpu_seconds=plan.total_bytes / gpu_bw,
        link=name, link_gbs=link,
    )


def _size_text(size: int) -> int | str:
    """max_memory values as people write them ("20GiB") when whole, else bytes."""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20)):
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return size


def snippet(model_id: str, architecture: str, gpu_budgets: list[int], cpu_budget: int, dtype: str,
            needs_disk: bool) -> str:
    """Ready-to-paste transformers code that loads the model with this plan."""
    memory = {i: _size_text(b) for i, b in enumerate(gpu_budgets)}
    memory["cpu"] = _size_text(cpu_budget)
    memory_text = "{" + ", ".join(f"{json.dumps(k) if isinstance(k, str) else k}: {json.dumps(v)}"
                                  for k, v in memory.items()) + "}"
    lines = [
        "import torch",
        f"from transformers import {architecture}",
        "",
        f"model = {architecture}.from_pretrained(",
        f"    {json.dumps(model_id)},",
        f"    dtype=torch.{dtype},",
        '    device_map="auto",',
        f"    max_memory={memory_text},",
    ]
    if needs_disk:
        lines.append('    offload_folder="offload",  # the layers that fit nowhere else are read from here')
    lines += [")", "print(model.hf_device_map)"]
    return "\n".join(lines)


def compact_map(device_map: dict) -> list[tuple[str, str, str, int]]:
    """Runs of consecutive modules on the same device: (first, last, device, count)."""
    runs: list[list] = []
    for name, device in device_map.items():
        if runs and runs[-1][2] == str(device):
            runs[-1][1] = name
            runs[-1][3] += 1
        else:
            runs.append([name, name, str(device), 1])
    return [tuple(run) for run in runs]


# ZeRO-Offload ----------------------------------------------------------------------------

@dataclass(frozen=True)
class ZeroOffload:
    """Mixed-precision Adam training of one model on one GPU, without and with ZeRO-Offload
    (Ren et al., "ZeRO-Offload: Democratizing billion-scale model training", USENIX ATC
    2021). Without: 16 bytes per parameter on the GPU (16-bit weights and gradients, float32
    master weights, momentum and variance). With: the GPU keeps the 16-bit weights (2 bytes)
    and runs forward and backward; the CPU holds the 16-bit gradients and the float32 states
    (14 bytes) and runs the Adam step; every step sends 2 bytes per parameter down (the
    gradients) and 2 back up (the updated weights). Activations come on top of both."""

    parameters: int
    gpu_plain_bytes: int
    gpu_offload_bytes: int
    cpu_offload_bytes: int
    transfer_bytes: int  # per step, both directions together
    transfer_seconds: float  # per step, the two directions one after the other
    compute_seconds: float  # forward and backward of one step on the GPU
    tokens: int
    link: str

    @property
    def hidden(self) -> bool:
        """The transfers take less time than the GPU's own work: offloading costs little."""
        return self.transfer_seconds <= self.compute_seconds

    def to_json(self) -> dict:
        return {**asdict(self), "hidden": self.hidden}


def zero_offload(parameters: int, card: Gpu, tokens: int, utilisation: float = 0.4) -> ZeroOffload:
    """Per training step of `tokens` tokens: 6 FLOPs per parameter per token at
    `utilisation` of the 16-bit peak, against 4 bytes per parameter over the host link."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= 10**9:
        raise CalculatorError("bad_size", name="tokens", value=str(tokens)[:30], high=10**9)
    name, link = host_link(card)
    transfer = 4 * parameters
    compute = 6.0 * parameters * tokens / (card.matmul_tflops("bfloat16") * 1e12 * utilisation)
    return ZeroOffload(parameters, 16 * parameters, 2 * parameters, 14 * parameters, transfer,
                       transfer / (link * 1e9), compute, tokens, name)


def tokens_to_hide_transfers(parameters: int, card: Gpu, utilisation: float = 0.4) -> int:
    """Tokens per step from which the GPU's work lasts longer than the transfers."""
    _, link = host_link(card)
    per_token = 6.0 / (card.matmul_tflops("bfloat16") * 1e12 * utilisation)
    tokens = max(1, math.ceil(4 / (link * 1e9) / per_token))
    # the same comparison as ZeroOffload.hidden, so the threshold agrees with it to the token
    while tokens > 1 and zero_offload(parameters, card, tokens - 1, utilisation).hidden:
        tokens -= 1
    while not zero_offload(parameters, card, tokens, utilisation).hidden:
        tokens += 1
    return tokens
