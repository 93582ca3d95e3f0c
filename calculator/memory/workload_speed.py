"""How fast each workload runs (roofline, speed.py's model), in the workload's own unit, and
how a speed the reader measured compares with that ceiling.

- generation: generated tokens per second (speed.generation);
- forward, vision: items (sequences, images) per second, one forward per batch;
- seq2seq, speech: the encoder reads its input once (compute-bound: 2 FLOPs per encoder
  parameter per token, attention where every token sees every other), each decoder layer
  projects the encoder's output to its cross-attention keys and values, then the decoder
  writes its answer token by token, reading the decoder's weights, its own cache and the
  cross-attention cache at every step. Speech adds audio hours per hour (one item = 30 s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import math

from calculator.models.architecture import ArchSpec
from calculator.core.errors import CalculatorError
from calculator.core.gpus import Gpu
from calculator.memory.inference import kv_cache_bytes, kv_dtype_for
from calculator.memory.speed import _cost, _dtype, _weight_bytes, active_parameters, forward_pass, generation
from calculator.models.summary import ModelSummary
from calculator.memory.workloads import Shape, audio_hours_per_hour

MAX_MEASURED = 1e12  # items or tokens per second: far beyond any card, keeps the arithmetic finite


@dataclass(frozen=True)
class WorkloadSpeed:
    workload: str
    batch: int
    seconds_per_batch: float  # one batch from its first forward to its last token
    items_per_second: float  # sequences, images or 30 s windows
    tokens_per_second: float  # generated tokens (0 for a forward pass)
    time_to_first_token: float  # the prefill (with the encoder for seq2seq and speech); a forward's time
    time_per_token: float  # one decoding step at the middle of the answer (0 for a forward pass)
    bound: str  # what bounds the step that dominates: memory or compute
    audio_hours_per_hour: float = 0.0

    @property
    def unit(self) -> str:
        """The unit a reader measures this workload in (and types back)."""
        return "tokens_per_second" if self.workload == "generation" else "items_per_second"

    @property
    def ceiling(self) -> float:
        return self.tokens_per_second if self.unit == "tokens_per_second" else self.items_per_second

    def seconds_for(self, items: int) -> float:
        """Time to run `items` items in batches of this size."""
        return math.ceil(items / self.batch) * self.seconds_per_batch

    def to_json(self) -> dict:
        return {**asdict(self), "unit": self.unit}


def encoder_parameters(spec: ArchSpec) -> int:
    """The encoder stack's matrices: per layer q, k, v and output projections (4 h^2) and the
    MLP (2 or, gated, 3 x h x width); biases, norms and the input stem left out (under 1%)."""
    mlp = (3 if spec.gated_mlp else 2) * spec.hidden * spec.intermediate
    attention = 2 * spec.hidden * spec.heads * spec.head_dim + 2 * spec.hidden * spec.kv_heads * spec.head_dim
    return spec.encoder_layers * (attention + mlp)


def workload_speed(summary: ModelSummary, spec: ArchSpec, gpu: Gpu, dtype: str, batch: int, run: Shape,
                   kv_dtype: str | None = None) -> WorkloadSpeed:
    """The ceiling of one batch of this workload on this card."""
    if run.workload == "generation":
        g = generation(summary, spec, gpu, dtype, batch, run.prompt, run.new_tokens, kv_dtype)
        return WorkloadSpeed(run.workload, batch, g.total_seconds, batch / g.total_seconds, g.tokens_per_second,
                             g.time_to_first_token, g.time_per_token, g.decode_bound)
    if not run.generates:
        step = forward_pass(summary, spec, gpu, dtype, batch, run.prompt)
        return WorkloadSpeed(run.workload, batch, step.seconds, batch / step.seconds, 0.0, step.seconds, 0.0,
                             step.bound)
    return _encoder_decoder(summary, spec, gpu, dtype, batch, run, kv_dtype)


def _encoder_decoder(summary, spec, gpu, dtype, batch, run: Shape, kv_dtype) -> WorkloadSpeed:
    dtype = _dtype(dtype)
    encoder_tokens = run.encoder_tokens or run.prompt
    total_bytes, per_parameter = _weight_bytes(summary, spec, dtype)
    encoder_params = min(encoder_parameters(spec), active_parameters(summary))
    decoder_params = active_parameters(summary) - encoder_params
    encoder_bytes = math.ceil(encoder_params * per_parameter)
    decoder_bytes = max(total_bytes - encoder_bytes, 0)
    attention = 4.0 * spec.heads * spec.head_dim  # per layer per (query, key) pair: scores and sum
    cross_kv = 2 * 2.0 * spec.hidden * spec.kv_heads * spec.head_dim  # keys and values of each frame
    encoder_flops = batch * encoder_tokens * (2.0 * encoder_params + attention * spec.encoder_layers * encoder_tokens)
    encoder = _cost(encoder_bytes, encoder_flops, gpu, dtype)
    cache_dtype = kv_dtype_for(dtype, kv_dtype)
    prompt_cache = kv_cache_bytes(spec, batch, run.prompt, cache_dtype, encoder_tokens=encoder_tokens)
    prefill_flops = batch * (spec.layers * cross_kv * encoder_tokens + run.prompt * (
        2.0 * decoder_params + attention * spec.layers * (run.prompt / 2 + encoder_tokens)))
    prefill = _cost(decoder_bytes + prompt_cache, prefill_flops, gpu, dtype)
    middle = run.prompt + run.new_tokens // 2
    step_cache = kv_cache_bytes(spec, batch, middle, cache_dtype, encoder_tokens=encoder_tokens)
    step_flops = batch * (2.0 * decoder_params + attention * spec.layers * (middle + encoder_tokens))
    step = _cost(decoder_bytes + step_cache, step_flops, gpu, dtype)
    first = encoder.seconds + prefill.seconds
    total = first + run.new_tokens * step.seconds
    bound = encoder.bound if encoder.seconds >= run.new_tokens * step.seconds else step.bound
    items = batch / total
    hours = audio_hours_per_hour(items) if run.workload == "speech" else 0.0
    return WorkloadSpeed(run.workload, batch, total, items, batch * run.new_tokens / total, first, step.seconds,
                         bound, hours)


# -- a measured speed against the ceiling ---------------------------------------------------

# What to read next, by how far below its ceiling a measured speed is (slow-model's sections).
FAR_BELOW, NEAR = 0.3, 0.7


@dataclass(frozen=True)
class AgainstCeiling:
    measured: float
    ceiling: float
    fraction: float  # measured / ceiling
    verdict: str  # far_below, below, near, above
    next_section: str  # chapter#anchor to read next

    def to_json(self) -> dict:
        return asdict(self)


def check_measured(value: object, unit: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_MEASURED \
            or not math.isfinite(value):
        raise CalculatorError("measured_needs_speed", unit=unit.replace("_", " "), value=str(value)[:30])
    return float(value)


def against_ceiling(measured: float, speed: WorkloadSpeed) -> AgainstCeiling:
    """What fraction of the roofline a measured speed reaches, and where to look next. Far
    below (under 30%): the code around the model (one item at a time, padding, eager attention,
    no inference mode). Below (30-70%): batching. Near (70-100%): the precision, then more GPUs.
    Above the roofline: the measurement or the case does not describe the same run."""
    measured = check_measured(measured, speed.unit)
    fraction = measured / speed.ceiling
    if fraction > 1.0:
        verdict, section = "above", "slow-model#triage"
    elif fraction < FAR_BELOW:
        verdict, section = "far_below", "slow-model#inference-code"
    elif fraction < NEAR:
        verdict, section = "below", "slow-model#batch-size"
    else:
        verdict, section = "near", "slow-model#precision"
    return AgainstCeiling(measured, speed.ceiling, fraction, verdict, section)
