"""What the meta-device count of a model yields, as plain data (no torch needed to read it).

A ModelSummary is stored for every catalog model, so a catalog lookup never imports torch.
Every byte figure the guide shows for a model at a precision is derived from it here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
import math

from calculator.core.precision import FLOAT_DTYPES, bytes_per_param, normalize_dtype

# Parameter groups, used to say what a quantization format really converts.
PARAM_GROUPS = ("linear", "experts", "embedding", "head", "norm", "bias", "other")

# Where a vision-language model keeps its image side (Gemma 3, Mistral 3: vision_tower and
# multi_modal_projector; Qwen2.5-VL: visual; Llama 4: vision_model): a module whose path holds
# one of these names belongs to it, and a text batch never runs it.
TOWER_PARTS = ("vision_tower", "visual", "vision_model", "multi_modal_projector")


def in_tower(path: str) -> bool:
    """A module path inside a vision-language model's image side (see TOWER_PARTS)."""
    return any(part in TOWER_PARTS for part in path.split("."))


def _buffer_bytes(fixed_bytes: int, scaled_elements: int, dtype: str) -> int:
    """Buffers keep their own dtype, except the floating ones created in the model's dtype.
    Those follow a floating model dtype, and stay in 16 bits when the weights are quantized."""
    size = 2 if dtype not in FLOAT_DTYPES else int(bytes_per_param(dtype))
    return fixed_bytes + scaled_elements * size


@dataclass(frozen=True)
class Unit:
    """A layer as `accelerate` defines it: a module never split across devices (one of the
    model's `_no_split_modules`, or a leaf), with its own parameters and buffers."""

    name: str
    parameters: int
    fixed_buffer_bytes: int = 0
    scaled_buffer_elements: int = 0

    def bytes_at(self, dtype: str) -> int:
        return math.ceil(self.parameters * bytes_per_param(dtype)) + _buffer_bytes(
            self.fixed_buffer_bytes, self.scaled_buffer_elements, dtype
        )


@dataclass(frozen=True)
class Linear:
    """Matrices of one shape that share a module name: `count` matrices of in x out weights
    named `name` (q_proj, down_proj, lm_head...). kind: linear, experts (a fused expert
    tensor counts one matrix per expert) or head. Quantization, tensor parallelism and LoRA
    are computed from these real shapes. `tower`: the matrices sit in a vision-language
    model's image side (their module path, `in_tower`)."""

    name: str
    in_features: int
    out_features: int
    count: int
    kind: str = "linear"
    tower: bool = False

    @property
    def parameters(self) -> int:
        return self.in_features * self.out_features * self.count


@dataclass(frozen=True)
class ModelSummary:
    architecture: str
    model_type: str
    model_class: str  # "auto": the checkpoint's own class; "base": the bare AutoModel
    parameters: int
    trainable_parameters: int
    active_parameters: int | None  # per token, for mixture-of-experts models only
    fixed_buffer_bytes: int
    scaled_buffer_elements: int
    units: tuple[Unit, ...]
    groups: dict[str, int] = field(default_factory=dict)
    no_split_modules: tuple[str, ...] = ()
    linears: tuple[Linear, ...] = ()

    @property
    def buffers_bytes(self) -> int:
        """Buffer bytes as the model holds them when built in float32."""
        return _buffer_bytes(self.fixed_buffer_bytes, self.scaled_buffer_elements, "float32")

    def buffer_bytes_at(self, dtype: str) -> int:
        return _buffer_bytes(self.fixed_buffer_bytes, self.scaled_buffer_elements, normalize_dtype(dtype))

    def total_bytes_at(self, dtype: str) -> int:
        """Parameters at the dtype's size, buffers at their own."""
        dtype = normalize_dtype(dtype)
        return math.ceil(self.parameters * bytes_per_param(dtype)) + self.buffer_bytes_at(dtype)

    def largest_unit_at(self, dtype: str) -> Unit | None:
        """The biggest unit at this dtype; the first one on a tie, as accelerate reports it."""
        dtype = normalize_dtype(dtype)
        best: Unit | None = None
        for unit in self.units:
            if best is None or unit.bytes_at(dtype) > best.bytes_at(dtype):
                best = unit
        return best

    def to_dict(self) -> dict:
        data = asdict(self)
        data["units"] = [list(_unit_row(u)) for u in self.units]
        data["no_split_modules"] = list(self.no_split_modules)
        data["linears"] = [[m.name, m.in_features, m.out_features, m.count, m.kind] + ([True] if m.tower else [])
                           for m in self.linears]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ModelSummary:
        units = tuple(Unit(*row) for row in data["units"])
        linears = tuple(Linear(*row) for row in data.get("linears", ()))
        return cls(**{**data, "units": units, "no_split_modules": tuple(data.get("no_split_modules", ())),
                      "linears": linears})


def _unit_row(unit: Unit) -> tuple:
    return (unit.name, unit.parameters, unit.fixed_buffer_bytes, unit.scaled_buffer_elements)
