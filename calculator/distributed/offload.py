"""CPU offloading: which modules go to the GPUs, the CPU and the disk, computed by
transformers' own placement on the model built on the meta device, what each device then
holds, and what streaming the offloaded weights costs at every forward pass.

`from_pretrained(device_map="auto", max_memory=...)` in transformers 5 balances the budget
over several GPUs (`get_balanced_memory`) and then calls its `infer_auto_device_map`
(transformers/integrations/accelerate.py, `_get_device_map`); with one GPU the budget is used
as given. The plan here runs those same functions (checked against `_get_device_map` and
accelerate's placement in tests/test_offload.py). The question readers ask is "my GPU has
this much: how much CPU memory do I need?": without a CPU budget the CPU takes whatever the
GPUs cannot and the plan says how much that is; with one, what does not fit goes to disk.
Quantized with bitsandbytes, transformers places the quantized layers and keeps the
offloaded ones unquantized: calculator/distributed/offload_bnb.py says how, from its source.

Offloaded weights stay in CPU memory (or on disk, memory-mapped) and accelerate's hooks copy
each offloaded layer to the GPU just before it runs, at every forward pass, so for every
generated token. The copies are not overlapped with computation, so their time adds up.
Sources: accelerate's big-model inference guide; PCIe bandwidths from PCI-SIG (16, 32 and
64 GB/s per direction for x16 links of generations 3, 4 and 5); an NVMe drive on PCIe 4.0
reads about 7 GB/s at best (e.g. the Samsung 990 PRO datasheet).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, field
import json
import logging
import math
import re

from calculator.core.errors import CalculatorError
from calculator.core.gpus import Gpu, host_link
from calculator.distributed.offload_bnb import (QUANTIZATIONS, BnbSizing, device_map_code, entry_sizes, split_cpu_and_disk, stored_bytes,
                          whole_gib_above)
from calculator.core.precision import FLOAT_DTYPES, normalize_dtype

DISK_GBS = 7.0
MAX_GPUS = 16
MAX_BUDGET_BYTES = 2**50  # one pebibyte: protects the arithmetic, not the user
_CLASS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,80}$")


def build_meta_model(config: dict, dtype: str, model_class: str = "auto"):
    """The model on the meta device in `dtype` (floating tensors created in it, as
    from_pretrained(dtype=...) creates them), for accelerate's placement."""
    import torch

    from calculator.models.meta import _quiet, make_config, model_constructor

    dtype = _check_dtype(dtype)
    cfg = make_config(config)
    construct = model_constructor(cfg, model_class)
    try:
        with _quiet(), torch.device("meta"):
            return construct(cfg, getattr(torch, dtype))
    except CalculatorError:
        raise
    except Exception as exc:
        from calculator.models.library_reasons import transformers_reason

        raise CalculatorError("build_failed", architecture=type(cfg).__name__,
                              detail=transformers_reason(exc, cfg)) from None


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


def check_quantization(quantization: str) -> str:
    if quantization not in QUANTIZATIONS:
        raise CalculatorError("offload_quantization", value=str(quantization)[:30], choices=", ".join(QUANTIZATIONS))
    return quantization


def default_gpu_budget(card: Gpu) -> int:
    """What the planner gives the weights on a card unless told otherwise: the memory a
    process gets there less the verdicts' headroom (calculator.core.budget), in whole MiB."""
    from calculator.core.budget import Budget

    return Budget(card).limit_bytes // 2**20 * 2**20


@dataclass(frozen=True)
class DevicePlan:
    device_map: dict  # module name -> 0, 1, ..., "cpu" or "disk", in model order
    max_memory: dict  # the budgets placed against (balanced over GPUs; quantized: times 0.9)
    bytes_by_device: dict  # "0", "1", ..., "cpu", "disk" -> bytes placed there, once loaded
    total_bytes: int  # the sum of bytes_by_device
    dtype: str
    quantization: str = "none"
    requested: dict = field(default_factory=dict)  # what the loading code passes as max_memory
    cpu_limit: int | None = None  # the CPU budget the reader gave (None: the CPU takes the rest)
    all_on_gpu_bytes: int = 0  # the whole model in GPU memory in the same format
    largest_offloaded_bytes: int = 0  # the biggest offloaded entry, copied to the GPU to run

    @property
    def gpu_bytes(self) -> int:
        return sum(v for k, v in self.bytes_by_device.items() if k not in ("cpu", "disk"))

    @property
    def cpu_bytes(self) -> int:
        """The CPU memory the offloaded weights need (without a CPU limit: all they need)."""
        return self.bytes_by_device.get("cpu", 0)

    @property
    def disk_bytes(self) -> int:
        return self.bytes_by_device.get("disk", 0)

    @property
    def offloaded(self) -> bool:
        return bool(self.cpu_bytes or self.disk_bytes)

    def to_json(self) -> dict:
        return {"device_map": {k: v for k, v in self.device_map.items()},
                "max_memory": {str(k): int(v) for k, v in self.max_memory.items()},
                "bytes_by_device": dict(self.bytes_by_device), "total_bytes": self.total_bytes,
                "gpu_bytes": self.gpu_bytes, "cpu_bytes": self.cpu_bytes, "disk_bytes": self.disk_bytes,
                "dtype": self.dtype, "quantization": self.quantization, "cpu_limit": self.cpu_limit,
                "cpu_needed_bytes": self.cpu_bytes, "all_on_gpu_bytes": self.all_on_gpu_bytes,
                "largest_offloaded_bytes": self.largest_offloaded_bytes,
                "requested_max_memory": {str(k): int(v) for k, v in self.requested.items()}}


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


def _auto_map(model, memory: dict, sizing) -> tuple[dict, dict]:
    """transformers' `_get_device_map(model, "auto", max_memory, quantizer)`
    (integrations/accelerate.py), step by step so that the map can be kept uncleaned (one entry
    per placed unit) and the budgets it placed against are known."""
    from transformers.integrations.accelerate import get_balanced_memory, infer_auto_device_map

    no_split = model._no_split_modules
    with _quiet_accelerate():
        inferred = get_balanced_memory(model, max_memory=dict(memory), no_split_module_classes=no_split,
                                       hf_quantizer=sizing, low_zero=False)
        if sizing is not None:
            inferred = sizing.adjust_max_memory(inferred)
        units = infer_auto_device_map(model, max_memory=dict(inferred), no_split_module_classes=no_split,
                                      hf_quantizer=sizing, clean_result=False,
                                      no_placement_params=getattr(model, "_no_placement_params", None))
    return units, inferred


def plan_device_map(model, gpu_budgets: list[int], cpu_budget: int | None = None, dtype: str = "bfloat16",
                    quantization: str = "none") -> DevicePlan:
    """What `from_pretrained(device_map="auto", max_memory=...)` places where, and what each
    device then holds. Without a CPU budget, the CPU takes whatever the GPUs cannot (nothing
    goes to disk) and the plan says how much that is. With bitsandbytes, the placement is the
    one transformers computes with its quantizer, loaded as an explicit map so that the
    offloaded modules stay unquantized (calculator/distributed/offload_bnb.py)."""
    from accelerate.utils.modeling import clean_device_map

    dtype = _check_dtype(dtype)
    quantization = check_quantization(quantization)
    memory = max_memory_for(gpu_budgets, MAX_BUDGET_BYTES if cpu_budget is None or quantization != "none"
                            else cpu_budget)
    sizing = BnbSizing(model, quantization) if quantization != "none" else None
    units, inferred = _auto_map(model, memory, sizing)
    if sizing is not None and cpu_budget is not None:
        _check_budget("CPU memory", cpu_budget)
        units = split_cpu_and_disk(units, entry_sizes(model, units), cpu_budget)
        inferred["cpu"] = cpu_budget
    device_map = clean_device_map(OrderedDict(units))
    placed, all_on_gpu = stored_bytes(model, device_map, sizing)
    offloaded = [size for key, size in entry_sizes(model, units).items() if units[key] in ("cpu", "disk")]
    largest = max(offloaded, default=0)
    requested = {i: b for i, b in enumerate(gpu_budgets)}
    if cpu_budget is not None:
        requested["cpu"] = cpu_budget
    elif placed.get("cpu", 0):
        requested["cpu"] = cpu_room(model, placed["cpu"], sizing)
    if cpu_budget is None and "cpu" in inferred:
        inferred["cpu"] = requested.get("cpu", 0)
    return DevicePlan(OrderedDict(device_map), dict(inferred), placed, sum(placed.values()), dtype, quantization,
                      requested, cpu_budget, all_on_gpu, largest)


def cpu_room(model, cpu_bytes: int, sizing=None) -> int:
    """The CPU budget to write in max_memory for a plan made without one: the offloaded
    weights and the largest layer, which accelerate keeps room for on the CPU, in whole GiB."""
    from accelerate.utils.modeling import get_max_layer_size
    from transformers.integrations.accelerate import compute_module_sizes

    sizes, _ = compute_module_sizes(model, sizing, only_modules=False)
    children = list(model.named_parameters(recurse=False)) + list(model.named_children())
    largest, _ = get_max_layer_size(children, sizes, model._no_split_modules or [])
    return whole_gib_above(cpu_bytes + largest)


@dataclass(frozen=True)
class OffloadCost:
    gpu_seconds: float  # reading the weights held on the GPUs
    cpu_seconds: float  # copying the CPU-held weights over PCIe
    disk_seconds: float  # reading the disk-held weights, then copying them
    all_on_gpu_seconds: float  # the same model read from GPU memory, had it fitted
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
    host link, disk-held ones from the drive and then over the link. The reference is the
    whole model in GPU memory in the same format (quantized, with bitsandbytes)."""
    name, link = host_link(card)
    gpu_bw = card.bandwidth_gbs * 1e9
    return OffloadCost(
        gpu_seconds=plan.gpu_bytes / gpu_bw,
        cpu_seconds=plan.cpu_bytes / (link * 1e9),
        disk_seconds=plan.disk_bytes / (DISK_GBS * 1e9) + plan.disk_bytes / (link * 1e9),
        all_on_gpu_seconds=(plan.all_on_gpu_bytes or plan.total_bytes) / gpu_bw,
        link=name, link_gbs=link,
    )


def _size_text(size: int) -> int | str:
    """max_memory values as people write them ("20GiB") when whole, else bytes."""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20)):
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return size


def _memory_text(memory: dict) -> str:
    return "{" + ", ".join(f"{json.dumps(k) if isinstance(k, str) else k}: {json.dumps(_size_text(v))}"
                           for k, v in memory.items()) + "}"


def snippet(model_id: str, architecture: str, plan: DevicePlan, lang: str = "en") -> str:
    """Ready-to-paste transformers code that loads the model with this plan, its comments in
    the reader's language. Plain weights: device_map="auto" with the budgets, which makes the
    same placement. bitsandbytes with offloading: the placement as an explicit map and
    llm_int8_enable_fp32_cpu_offload, the one way transformers accepts quantized layers on the
    GPU beside unquantized ones elsewhere."""
    from calculator.core.messages import text

    say = lambda key, **params: text(f"offload.code_{key}", lang, **params)  # noqa: E731
    if not _CLASS_NAME.match(architecture):
        raise ValueError("architecture must be a class name")
    quantized = plan.quantization != "none"
    explicit = quantized and plan.offloaded
    imports = f"from transformers import BitsAndBytesConfig, {architecture}" if quantized else \
        f"from transformers import {architecture}"
    lines = ["import torch", imports]
    if quantized:
        compute = plan.dtype
        if plan.quantization == "bnb-int8":
            options = ["    load_in_8bit=True,"]
        else:
            options = ["    load_in_4bit=True,", f'    bnb_4bit_quant_type="{plan.quantization.removeprefix("bnb-")}",',
                       f"    bnb_4bit_compute_dtype=torch.{compute},"]
        if explicit:
            options.append("    llm_int8_enable_fp32_cpu_offload=True,")
        flag = [f"# {say('offload_flag', dtype=plan.dtype)}"] if explicit else []
        lines += ["", *flag, "quantization = BitsAndBytesConfig(", *options, ")"]
    if explicit:
        lines += ["", f"# {say('explicit_map')}"]
        lines += device_map_code(plan.device_map)
    lines += ["", f"model = {architecture}.from_pretrained(", f"    {json.dumps(model_id)},",
              f"    dtype=torch.{plan.dtype},"]
    if quantized:
        lines.append("    quantization_config=quantization,")
    if explicit:
        lines.append("    device_map=device_map,")
    else:
        memory = {k: v for k, v in plan.requested.items() if k != "cpu" or plan.offloaded or plan.cpu_limit is not None}
        lines += ['    device_map="auto",', f"    max_memory={_memory_text(memory)},  # {say('budgets')}"]
    if plan.disk_bytes:
        lines.append(f'    offload_folder="offload",  # {say("disk")}')
    lines += [")", f"print(model.hf_device_map)  # {say('shows')}"]
    return "\n".join(lines) + "\n"


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
