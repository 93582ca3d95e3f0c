"""bitsandbytes quantization with offloading, as transformers 5.24 does it, without importing
bitsandbytes (the guide's server does not install it; the tests check this stand-in against
transformers' own bitsandbytes quantizers).

What transformers does (transformers 5.24.0, read in the installed package):
- `from_pretrained` builds the model, then the quantizer's `_process_model_before_weight_loading`
  (quantizers/quantizer_bnb_4bit.py and quantizer_bnb_8bit.py) replaces every `nn.Linear` and
  `Conv1D` (integrations/bitsandbytes.py, `replace_with_bnb_linear`) except the modules
  `get_modules_to_not_convert` keeps (quantizers/base.py, `get_keys_to_not_convert`: the output
  embeddings, tied weights and the last parameter; plus the model's `_keep_in_fp32_modules`).
  The replaced modules are made under the load dtype (`local_torch_dtype`), so their biases
  keep it.
- Then `_get_device_map` (integrations/accelerate.py) places the model for `device_map="auto"`:
  sizes from `compute_module_sizes`, where the quantizer's `param_element_size` counts each
  replaced weight at 0.5 byte (4-bit) or 1 byte (8-bit) per element and everything else at its
  own size; the budgets are multiplied by 0.9 (`adjust_max_memory`: "buffers that are created
  during quantization"); then its own `infer_auto_device_map`.
- `validate_environment` refuses a map with modules on the CPU or the disk unless
  `llm_int8_enable_fp32_cpu_offload=True`. With that flag and a map given as a dict, the
  modules the dict puts on "cpu" or "disk" join the modules not to convert: they stay plain
  `nn.Linear` in the load dtype (the flag's name says float32; it is float32 only when the
  model is loaded in float32; the bitsandbytes quantizers of 5.24 do not change the dtype).
  With the flag and `device_map="auto"`, the layers are replaced before the map is made, so
  the offloaded ones are quantized too and then streamed: that path is not the one documented
  ("pass a custom device_map"), and the plans here use the dict.

So a plan places the modules as `device_map="auto"` would with the quantizer's sizes, then
loads them with that map as a dict: quantized on the GPUs, in the load dtype elsewhere.
What a quantized matrix really occupies on the GPU (weights and their scales) comes from
calculator.memory.quantization (bnb_int8_bytes, bnb_nf4_bytes), not from the 0.5 or 1 byte estimate
transformers places with.
"""

from __future__ import annotations

import json
import math

from calculator.memory.quantization import bnb_int8_bytes, bnb_nf4_bytes

QUANTIZATIONS = ("none", "bnb-int8", "bnb-nf4", "bnb-fp4")
BUDGET_SHARE = 0.90  # Bnb4BitHfQuantizer.adjust_max_memory / Bnb8BitHfQuantizer.adjust_max_memory


class BnbSizing:
    """Stands in for transformers' bitsandbytes quantizer where `_get_device_map` asks it
    something: the element size of each tensor, the budget adjustment and the check of the
    map (the dict path with llm_int8_enable_fp32_cpu_offload accepts CPU and disk)."""

    def __init__(self, model, quantization: str) -> None:
        import torch
        from transformers.pytorch_utils import Conv1D
        from transformers.quantizers.base import HfQuantizer
        from transformers.quantizers.quantizers_utils import should_convert_module

        self.quantization = quantization
        self._root = model
        keep = HfQuantizer.get_modules_to_not_convert(model, None, getattr(model, "_keep_in_fp32_modules", None))
        self.converted: dict[str, tuple[int, int]] = {}  # weight name -> (in, out)
        for name, module in model.named_modules():
            if not should_convert_module(name, keep):
                continue
            if isinstance(module, Conv1D):
                in_f, out_f = module.weight.shape
            elif type(module) is torch.nn.Linear:
                in_f, out_f = module.in_features, module.out_features
            else:
                continue
            self.converted[f"{name}.weight"] = (int(in_f), int(out_f))

    @property
    def quantized_element_size(self) -> float:
        return 1.0 if self.quantization == "bnb-int8" else 0.5

    def param_element_size(self, model, param_name: str, param) -> float:
        if model is self._root and param_name in self.converted:
            return self.quantized_element_size
        return param.element_size()

    def adjust_max_memory(self, max_memory: dict) -> dict:
        return {key: value * BUDGET_SHARE for key, value in max_memory.items()}

    def validate_environment(self, *args, **kwargs) -> None:
        return None

    def gpu_bytes(self, name: str) -> int | None:
        """What a replaced weight occupies on a GPU once quantized (None: not replaced)."""
        shape = self.converted.get(name)
        if shape is None:
            return None
        in_f, out_f = shape
        if self.quantization == "bnb-int8":
            return bnb_int8_bytes(in_f, out_f)
        return bnb_nf4_bytes(in_f * out_f, double_quant=False)  # FP4 has NF4's layout


def device_of(name: str, device_map: dict):
    """The device a parameter or buffer lands on: the longest map key that contains it."""
    best, found = -1, None
    for key, device in device_map.items():
        if key == "" or name == key or name.startswith(key + "."):
            if len(key) > best:
                best, found = len(key), device
    return found


def stored_bytes(model, device_map: dict, sizing: BnbSizing | None) -> tuple[dict, int]:
    """Bytes on each device once loaded with this map ("0", "1", ..., "cpu", "disk"), and the
    bytes of the whole model on a GPU in the same format: a replaced weight at its quantized
    size on a GPU, every other tensor (and every tensor elsewhere) at its own size."""
    placed: dict[str, int] = {}
    all_on_gpu = 0
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    for name, tensor in tensors:
        own = tensor.numel() * tensor.element_size()
        quantized = sizing.gpu_bytes(name) if sizing is not None else None
        device = str(device_of(name, device_map))
        on_gpu = device not in ("cpu", "disk")
        size = quantized if quantized is not None and on_gpu else own
        placed[device] = placed.get(device, 0) + size
        all_on_gpu += quantized if quantized is not None else own
    order = {str(d): i for i, d in enumerate(dict.fromkeys(device_map.values()))}
    return dict(sorted(placed.items(), key=lambda item: order.get(item[0], len(order)))), all_on_gpu


def split_cpu_and_disk(device_map: dict, sizes: dict[str, int], cpu_limit: int) -> dict:
    """The offloaded entries of a map shared between the CPU and the disk, in model order, as
    accelerate's placement moves on from a full device: the CPU keeps room for the largest
    offloaded entry (it is read back through CPU memory) and, once one entry does not fit,
    it and every later one go to the disk."""
    offloaded = [key for key, device in device_map.items() if device in ("cpu", "disk")]
    reserve = max((sizes[key] for key in offloaded), default=0)
    used, full = 0, False
    result = {}
    for key, device in device_map.items():
        if device not in ("cpu", "disk"):
            result[key] = device
            continue
        if not full and used + sizes[key] <= cpu_limit - reserve:
            used += sizes[key]
            result[key] = "cpu"
        else:
            full = True
            result[key] = "disk"
    return result


def entry_sizes(model, device_map: dict) -> dict[str, int]:
    """Each map entry's bytes at the tensors' own size (offloaded modules are not quantized)."""
    sizes = dict.fromkeys(device_map, 0)
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        best = max((k for k in device_map if k == "" or name == k or name.startswith(k + ".")), key=len, default=None)
        if best is not None:
            sizes[best] += tensor.numel() * tensor.element_size()
    return sizes


def device_map_code(device_map: dict) -> list[str]:
    """`device_map = {...}` as Python lines, consecutive numbered layers on one device written
    as one dict comprehension (`**{f"model.layers.{i}": 0 for i in range(0, 20)}`)."""
    runs: list[list] = []  # [prefix or None, first, last, device, name]
    for name, device in device_map.items():
        prefix, _, index = name.rpartition(".")
        if prefix and index.isdigit():
            last = runs[-1] if runs else None
            if last and last[0] == prefix and last[3] == device and last[2] == int(index) - 1:
                last[2] = int(index)
                continue
            runs.append([prefix, int(index), int(index), device, name])
        else:
            runs.append([None, 0, 0, device, name])
    lines = ["device_map = {"]
    for prefix, first, last, device, name in runs:
        value = json.dumps(device) if isinstance(device, str) else str(int(device))
        if prefix is not None and last > first:
            pattern = json.dumps(prefix + ".{i}").replace("{", "{{").replace("}", "}}").replace("{{i}}", "{i}")
            lines.append(f"    **{{f{pattern}: {value} for i in range({first}, {last + 1})}},")
        else:
            lines.append(f"    {json.dumps(name)}: {value},")
    lines.append("}")
    return lines


def whole_gib_above(size: float) -> int:
    """The smallest whole number of GiB at or above a size."""
    return max(1, math.ceil(size / 2**30)) * 2**30
