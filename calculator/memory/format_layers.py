"""A quantization format's bytes layer by layer: the estimate's "largest layer" for `mxfp4`,
`nvfp4`, `Q4_K`... derived from the model's matrix shapes (ModelSummary.linears) and its
layers' parameter counts (ModelSummary.units), with no figure stored for it.

accelerate's layers (units) carry a parameter count, not the list of matrices they hold, so
each quantized matrix is placed by what the shapes say about it:
- a unit that is one matrix alone (named as the matrix, with as many parameters, a bias
  aside) holds it: an untied output head, or the leaf layers of a model accelerate does not
  group into blocks (DistilBERT's q_lin...);
- mixture-of-experts: the expert tensors count one matrix per expert, so count / experts is
  the number of expert layers, and those are the largest repeated layers (a model may start
  with dense layers, as DeepSeek-V3, or alternate them, as Llama 4 Maverick);
- every other quantized matrix sits in the repeated layers (units named `...layers.N`), each
  layer taking a share in proportion to its parameters outside the experts: exact when the
  layers have the same shapes, as in every decoder-only model; for an encoder-decoder or a
  vision tower the share is an average over layers of different kinds.
GGUF also stores the embeddings in a block type (quantization.quantize_model): the units named
as embeddings get them when their parameters add up to the model's; otherwise (BERT-like
models, whose embeddings block holds its norm) they are left in 16 bits, an overestimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
import math
import re

from calculator.core.budget import rounding_bytes
from calculator.core.errors import CalculatorError
from calculator.models.architecture import ArchSpec
from calculator.models.summary import ModelSummary, Unit, _buffer_bytes
from calculator.memory.quantization import (QuantFormat, _quantized_by, gguf_bytes, gguf_head_type, matrix_bytes,
                                            quant_format, quantize_model)

_REPEATED = re.compile(r"\.\d+$")  # model.layers.12, encoder.layer.3, vision_model.blocks.0


@dataclass(frozen=True)
class UnitInFormat:
    name: str
    parameters: int
    bytes: int


def _check_spec(spec: ArchSpec | None, fmt: QuantFormat) -> ArchSpec:
    if spec is None:  # a checkpoint counted from its safetensors headers: no matrix shapes
        raise CalculatorError("format_needs_shapes", name=fmt.key)
    return spec


def format_total_bytes(summary: ModelSummary, spec: ArchSpec | None, fmt: QuantFormat | str) -> int:
    """The whole model stored in the format (quantization.quantize_model: scales included)."""
    fmt = quant_format(fmt) if isinstance(fmt, str) else fmt
    return quantize_model(summary, _check_spec(spec, fmt), fmt).total_bytes


def units_in_format(summary: ModelSummary, spec: ArchSpec | None, fmt: QuantFormat | str) -> list[UnitInFormat]:
    """Each unit's bytes with its quantized matrices stored in the format and the rest in 16
    bits (GGUF: 32 bits for what a repeated layer keeps, its norms and biases)."""
    fmt = quant_format(fmt) if isinstance(fmt, str) else fmt
    spec = _check_spec(spec, fmt)
    units = list(summary.units)
    quantized: dict[int, list[Fraction]] = {i: [Fraction(0), Fraction(0)] for i in range(len(units))}  # params, bytes
    layers = [i for i, u in enumerate(units) if _REPEATED.search(u.name)]
    if not layers:  # no repeated blocks (leaf units): spread what no unit holds alone over them all
        layers = list(range(len(units)))
    spread = [Fraction(0), Fraction(0)]
    alone: set[int] = set()  # units that are one matrix: priced whole, kept out of the spread
    experts = [m for m in summary.linears if m.kind == "experts" and _quantized_by(fmt, m, spec)]
    expert_units = _expert_units(units, layers, experts, spec)
    for matrix in summary.linears:
        if not _quantized_by(fmt, matrix, spec):
            continue
        one = _matrix_bytes(fmt, matrix, summary, spec)
        if matrix.kind == "experts" and expert_units:
            for i in expert_units:
                quantized[i][0] += Fraction(matrix.parameters, len(expert_units))
                quantized[i][1] += Fraction(matrix.count * one, len(expert_units))
            continue
        homes = _matrix_units(units, matrix)[:matrix.count]  # units that are this matrix alone
        alone.update(homes)
        for i in homes:
            quantized[i][0] += matrix.in_features * matrix.out_features
            quantized[i][1] += one
        left = matrix.count - len(homes)
        spread[0] += left * matrix.in_features * matrix.out_features
        spread[1] += left * one
    expert_params = {i: quantized[i][0] for i in expert_units}
    weights = {i: units[i].parameters - expert_params.get(i, 0) for i in layers if i not in alone}
    total = sum(weights.values())
    for i in weights if total else ():
        quantized[i][0] += spread[0] * weights[i] / total
        quantized[i][1] += spread[1] * weights[i] / total
    if fmt.family == "gguf":
        _gguf_embedding(units, quantized, summary, spec, fmt)
    kept_size = 4 if fmt.family == "gguf" else 2
    out = []
    for i, unit in enumerate(units):
        params, stored = quantized[i]
        kept = (kept_size if i in layers else 2) * (unit.parameters - params)
        buffers = _buffer_bytes(unit.fixed_buffer_bytes, unit.scaled_buffer_elements, "bfloat16")
        out.append(UnitInFormat(unit.name, unit.parameters, math.ceil(stored + kept) + buffers))
    return out


def largest_unit_in_format(summary: ModelSummary, spec: ArchSpec | None, fmt: QuantFormat | str) -> UnitInFormat | None:
    """The biggest unit in the format; the first one on a tie, as accelerate reports it."""
    best = None
    for unit in units_in_format(summary, spec, fmt):
        if best is None or unit.bytes > best.bytes:
            best = unit
    return best


def format_weight_rounding(summary: ModelSummary, spec: ArchSpec | None, fmt: QuantFormat | str) -> int:
    """The caching allocator's rounding of each stored matrix (estimate.weight_rounding's rule),
    each quantized matrix at its format's size and the others in 16 bits."""
    fmt = quant_format(fmt) if isinstance(fmt, str) else fmt
    spec = _check_spec(spec, fmt)
    waste = 0
    for m in summary.linears:
        one = _matrix_bytes(fmt, m, summary, spec) if _quantized_by(fmt, m, spec) else 2 * m.in_features * m.out_features
        waste += m.count * rounding_bytes([one])
    return waste


def _matrix_bytes(fmt: QuantFormat, matrix, summary: ModelSummary, spec: ArchSpec) -> int:
    if fmt.family == "gguf" and matrix.kind == "head":
        return gguf_bytes(gguf_head_type(fmt.key, summary, spec), matrix.out_features, matrix.in_features)
    return matrix_bytes(fmt, matrix.in_features, matrix.out_features)


def _matrix_units(units: list[Unit], matrix) -> list[int]:
    """The units that are one such matrix alone (with its bias): an untied output head, or the
    leaf layers of a model without larger blocks (DistilBERT's q_lin...)."""
    size = matrix.in_features * matrix.out_features
    return [i for i, unit in enumerate(units)
            if unit.name.rsplit(".", 1)[-1] == matrix.name and unit.parameters in (size, size + matrix.out_features)]


def _own_unit(units: list[Unit], matrix) -> int | None:
    homes = _matrix_units(units, matrix)
    return homes[0] if homes and matrix.count == 1 else None


def _expert_units(units: list[Unit], layers: list[int], experts, spec: ArchSpec) -> list[int]:
    """The repeated layers that hold experts: as many as the expert tensors say, the largest."""
    if not experts or not spec.experts:
        return []
    count = experts[0].count // spec.experts
    if count <= 0 or count > len(layers):
        return []
    return sorted(sorted(layers, key=lambda i: -units[i].parameters)[:count])


_EMBEDDING = re.compile(r"emb|wte|wpe|shared")


def _gguf_embedding(units: list[Unit], quantized: dict, summary: ModelSummary, spec: ArchSpec,
                    fmt: QuantFormat) -> None:
    """GGUF's embeddings (token, position), in the units that hold them when their parameters
    add up to the model's embeddings: the token table in the head's type when the head is tied
    to it (quantize_model's rule), the others in the format's."""
    embedding, row = summary.groups.get("embedding", 0), spec.hidden
    heads = {_own_unit(units, m) for m in summary.linears if m.kind == "head"}
    homes = [i for i, u in enumerate(units) if _EMBEDDING.search(u.name.rsplit(".", 1)[-1].lower())
             and not _REPEATED.search(u.name) and i not in heads and u.parameters and row
             and u.parameters % row == 0]
    if not embedding or sum(units[i].parameters for i in homes) != embedding:
        return
    tied = any(m.kind == "tied-head" for m in summary.linears)
    for i in homes:
        as_head = tied and units[i].parameters == spec.vocab * row
        block = gguf_head_type(fmt.key, summary, spec) if as_head else fmt.key
        quantized[i] = [Fraction(units[i].parameters), Fraction(gguf_bytes(block, units[i].parameters // row, row))]
