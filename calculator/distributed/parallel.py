"""Model parallelism: a pipeline split of the real layers, the pipeline bubble and its
schedule, and tensor parallelism's per-GPU memory and communication.

Pipeline: the model's units (accelerate-style layers, in model order, embeddings and head
where they sit) are cut into k contiguous stages whose largest one is as small as possible.
Bubble: Huang et al., "GPipe" (NeurIPS 2019), and Narayanan et al., "Efficient large-scale
language model training on GPU clusters using Megatron-LM" (SC 2021): with p stages and m
micro-batches a stage idles (p - 1) / (m + p - 1) of the time, for GPipe and for 1F1B.
Tensor parallelism: Shoeybi et al., "Megatron-LM" (2019): the first matrix of each pair is
split by columns (its outputs), the second by rows (its inputs), so a layer needs one
all-reduce of its activations after attention and one after the MLP.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import math

from calculator.models.architecture import ArchSpec
from calculator.core.errors import CalculatorError
from calculator.core.gpus import PCIE_GBS
from calculator.core.precision import bytes_per_param, normalize_dtype
from calculator.memory.quantization import is_router
from calculator.memory.speed import NETWORKS_GBS, ring_allreduce_seconds
from calculator.models.summary import ModelSummary, Unit

MAX_STAGES = 64
MAX_MICRO_BATCHES = 256
TP_DEGREES = (1, 2, 4, 8, 16)


def _check_count(name: str, value: object, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise CalculatorError("bad_size", name=name, value=str(value)[:30], high=high)
    return value


# Pipeline split --------------------------------------------------------------------------

@dataclass(frozen=True)
class Stage:
    gpu: int
    first: str  # first unit's name
    last: str
    units: int
    bytes: int
    kinds: dict  # bytes by what they are: embedding, layers, head, other

    def to_json(self) -> dict:
        return asdict(self)


def unit_kind(unit: Unit, summary: ModelSummary) -> str:
    """What a unit is, for the chart: the repeated layers, the embeddings, the output head."""
    last = unit.name.split(".")[-1]
    if last.isdigit():
        return "layers"
    head_names = {m.name for m in summary.linears if m.kind in ("head", "tied-head")}
    if last in head_names or last in ("lm_head", "classifier", "cls", "vocab_projector"):
        return "head"
    if "rotary" in last:
        return "other"
    if "emb" in last or last in ("wte", "wpe", "shared", "embed_in", "word_embeddings", "embeddings"):
        return "embedding"
    return "other"


def _partition(sizes: list[int], stages: int) -> list[int]:
    """Cut points of `sizes` into `stages` contiguous non-empty parts minimising the largest
    part (binary search on that bound, greedy fill), returned as part lengths."""
    def parts_for(limit: int) -> list[int] | None:
        lengths, current, count = [], 0, 0
        for index, size in enumerate(sizes):
            left_units = len(sizes) - index
            left_stages = stages - len(lengths)
            if count and (current + size > limit or left_units < left_stages):
                lengths.append(count)
                current, count = 0, 0
            current += size
            count += 1
        lengths.append(count)
        return lengths if len(lengths) <= stages and max(_sums(sizes, lengths)) <= limit else None

    low, high = max(sizes), sum(sizes)
    while low < high:
        mid = (low + high) // 2
        if parts_for(mid) is None:
            low = mid + 1
        else:
            high = mid
    lengths = _even_parts(sizes, stages, low) or parts_for(low)
    while len(lengths) < stages:  # fewer parts than stages: split the largest multi-unit part
        index = max((i for i, n in enumerate(lengths) if n > 1), key=lambda i: _sums(sizes, lengths)[i])
        lengths[index:index + 1] = [lengths[index] - lengths[index] // 2, lengths[index] // 2]
    return lengths


def _even_parts(sizes: list[int], stages: int, limit: int) -> list[int] | None:
    """Same largest part, spread more evenly: each stage aims at the average of what is
    left, so the last GPU is not left nearly empty. None if that misses the bound."""
    lengths, start = [], 0
    for stage in range(stages):
        left = stages - stage
        target = sum(sizes[start:]) / left
        current, count = 0, 0
        while start + count < len(sizes) - (left - 1):
            size = sizes[start + count]
            if count and (current + size > limit or abs(current + size - target) > abs(current - target)):
                break
            current += size
            count += 1
        if stage == stages - 1:
            count = len(sizes) - start
        lengths.append(count)
        start += count
    return lengths if max(_sums(sizes, lengths)) <= limit and all(lengths) else None


def _sums(sizes: list[int], lengths: list[int]) -> list[int]:
    out, start = [], 0
    for n in lengths:
        out.append(sum(sizes[start:start + n]))
        start += n
    return out


def pipeline_split(summary: ModelSummary, dtype: str, gpus: int, sizes: list[int] | None = None
                   ) -> tuple[Stage, ...]:
    """The model's units, in order, over `gpus` stages balanced by bytes. Tensors held
    outside any unit (BERT's output bias, StarCoder's causal-mask buffer) go with the last
    stage, so the stages always add up to the model's total. `sizes`: each unit's bytes when
    a quantization format stores them (format_layers.units_in_format), the rest in `dtype`."""
    dtype = normalize_dtype(dtype)
    units = list(summary.units)
    gpus = _check_count("number of GPUs", gpus, min(MAX_STAGES, len(units)) if units else 1)
    plain = [u.bytes_at(dtype) for u in units]
    sizes = plain if sizes is None else list(sizes)
    lengths = _partition(sizes, gpus)
    stages, start = [], 0
    loose = summary.total_bytes_at(dtype) - sum(plain)
    for gpu, n in enumerate(lengths):
        chunk = units[start:start + n]
        kinds: dict[str, int] = {}
        for unit, size in zip(chunk, sizes[start:start + n]):
            kind = unit_kind(unit, summary)
            kinds[kind] = kinds.get(kind, 0) + size
        total = sum(sizes[start:start + n])
        if gpu == len(lengths) - 1 and loose:
            kinds["other"] = kinds.get("other", 0) + loose
            total += loose
        stages.append(Stage(gpu, chunk[0].name, chunk[-1].name, n, total, kinds))
        start += n
    return tuple(stages)


def tied_head_copy_bytes(summary: ModelSummary, spec: ArchSpec, dtype: str) -> int:
    """Bytes of the output head that shares the input embeddings: a pipeline that puts the
    head on another GPU than the embeddings needs a copy there (Megatron-LM keeps one on the
    last stage and all-reduces its gradient with the first)."""
    if not any(m.kind == "tied-head" for m in summary.linears):
        return 0
    return math.ceil(spec.vocab * spec.hidden * bytes_per_param(dtype))


# Pipeline bubble and schedule ------------------------------------------------------------

SCHEDULES = ("GPipe", "1F1B")


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """The share of each stage's time spent idle: (p - 1) / (m + p - 1)."""
    p = _check_count("number of stages", stages, MAX_STAGES)
    m = _check_count("number of micro-batches", micro_batches, MAX_MICRO_BATCHES)
    return (p - 1) / (m + p - 1)


@dataclass(frozen=True)
class Slot:
    stage: int
    micro_batch: int
    phase: str  # "F" forward, "B" backward
    start: float
    end: float


def _stage_order(schedule: str, stage: int, stages: int, micro_batches: int) -> list[tuple[str, int]]:
    if schedule == "GPipe":
        return [("F", i) for i in range(micro_batches)] + [("B", i) for i in range(micro_batches)]
    warmup = min(stages - stage - 1, micro_batches)  # 1F1B (PipeDream-Flush): warm up, then alternate
    order = [("F", i) for i in range(warmup)]
    forward, backward = warmup, 0
    while backward < micro_batches:
        if forward < micro_batches:
            order.append(("F", forward))
            forward += 1
        order.append(("B", backward))
        backward += 1
    return order


def pipeline_schedule(stages: int, micro_batches: int, schedule: str = "GPipe",
                      forward: float = 1.0, backward: float = 2.0) -> tuple[Slot, ...]:
    """Every stage runs its operations in its schedule's order, each as soon as its input is
    ready: a forward needs the previous stage's forward of that micro-batch, a backward the
    next stage's backward. Times in units of one stage's forward (backward about twice it)."""
    p = _check_count("number of stages", stages, MAX_STAGES)
    m = _check_count("number of micro-batches", micro_batches, MAX_MICRO_BATCHES)
    if schedule not in SCHEDULES:
        raise CalculatorError("unknown_choice", name="schedule", value=str(schedule)[:30], choices=", ".join(SCHEDULES))
    orders = [_stage_order(schedule, s, p, m) for s in range(p)]
    done: dict[tuple[str, int, int], float] = {}
    position, free = [0] * p, [0.0] * p
    slots: list[Slot] = []
    while len(slots) < 2 * p * m:
        progressed = False
        for s in range(p):
            if position[s] == len(orders[s]):
                continue
            phase, i = orders[s][position[s]]
            needed = ("F", s - 1, i) if phase == "F" else (("B", s + 1, i) if s + 1 < p else ("F", s, i))
            if phase == "F" and s == 0:
                ready = 0.0
            elif needed in done:
                ready = done[needed]
            else:
                continue
            start = max(ready, free[s])
            end = start + (forward if phase == "F" else backward)
            done[(phase, s, i)] = free[s] = end
            slots.append(Slot(s, i, phase, start, end))
            position[s] += 1
            progressed = True
        if not progressed:  # cannot happen with these orders; guards against an endless loop
            raise RuntimeError("pipeline schedule deadlocked")
    return tuple(sorted(slots, key=lambda x: (x.stage, x.start)))


def schedule_idle_fraction(slots: tuple[Slot, ...], stages: int) -> float:
    """Idle share of the whole run, measured on the drawn schedule."""
    span = max(slot.end for slot in slots)
    busy = sum(slot.end - slot.start for slot in slots)
    return 1 - busy / (span * stages)


def peak_in_flight(slots: tuple[Slot, ...], stage: int) -> int:
    """Micro-batches whose activations stage `stage` holds at once (forward done, backward
    not yet): m for GPipe, at most p for 1F1B, which is why 1F1B needs less memory."""
    events = sorted((s.end if s.phase == "F" else s.end, 1 if s.phase == "F" else -1)
                    for s in slots if s.stage == stage)
    held = peak = 0
    for _, change in events:
        held += change
        peak = max(peak, held)
    return peak


# Tensor parallelism ----------------------------------------------------------------------

COLUMN = {"q_proj", "k_proj", "v_proj", "q", "k", "v", "query", "key", "value", "q_lin", "k_lin", "v_lin",
          "c_attn", "query_key_value", "gate_proj", "up_proj", "gate_up_proj", "w1", "w3", "wi", "wi_0",
          "wi_1", "c_fc", "fc1", "dense_h_to_4h", "lin1", "q_b_proj", "kv_b_proj", "lm_head",
          "vocab_projector", "decoder"}
ROW = {"o_proj", "o", "out_proj", "out_lin", "c_proj", "wo", "down_proj", "w2", "fc2", "dense_4h_to_h", "lin2",
       "dense"}
REPLICATED = {"q_a_proj", "kv_a_proj_with_mqa", "classifier", "vocab_transform"}  # small or low-rank
KV_ONLY = {"k_proj", "v_proj", "k", "v", "key", "value", "k_lin", "v_lin"}
FUSED_QKV = {"c_attn", "query_key_value"}


@dataclass(frozen=True)
class TensorSplit:
    name: str
    in_features: int
    out_features: int
    count: int
    split: str  # "columns", "rows" or "replicated"
    bytes_per_gpu: int


@dataclass(frozen=True)
class TensorParallel:
    degree: int
    dtype: str
    matrices: tuple[TensorSplit, ...]
    split_bytes_per_gpu: int  # this GPU's slice of the split matrices and embeddings
    replicated_bytes: int  # what every GPU holds whole: norms, biases, routers, KV heads...
    per_gpu_bytes: int
    total_bytes: int  # the model on one GPU
    allreduces_per_forward: int
    allreduce_bytes: int  # one all-reduce, for the given tokens

    def to_json(self) -> dict:
        data = asdict(self)
        data["matrices"] = [asdict(m) for m in self.matrices]
        return data


def check_degree(spec: ArchSpec, degree: object) -> int:
    """Megatron-LM and vLLM split attention by heads: the degree must divide the heads, and
    key/value heads either divide by it or are replicated evenly."""
    degree = _check_count("tensor-parallel degree", degree, max(TP_DEGREES))
    heads, kv = spec.heads or 1, spec.kv_heads or spec.heads or 1
    if heads % degree or (kv % degree and degree % kv):
        raise CalculatorError("tp_degree", degree=degree, heads=heads, kv_heads=kv)
    return degree


def split_of(name: str, in_f: int, out_f: int) -> str:
    if name in REPLICATED:
        return "replicated"
    if name in COLUMN:
        return "columns"
    if name in ROW:
        return "rows"
    return "columns" if out_f >= in_f else "rows"  # the expanding matrix of a pair comes first


def tensor_parallel(summary: ModelSummary, spec: ArchSpec, dtype: str, degree: int,
                    tokens: int = 1) -> TensorParallel:
    """Per-GPU weights with tensor parallelism of degree t (the Megatron-LM layout): split
    matrices and the vocabulary embedding divided by t; norms, biases, routers and low-rank
    projections held whole by every GPU; key/value heads replicated when t exceeds them."""
    dtype = normalize_dtype(dtype)
    t = check_degree(spec, degree)
    _check_count("tokens", tokens, 10**8)
    size = bytes_per_param(dtype)
    kv_share = max(1 / t, 1 / (spec.kv_heads or 1))  # share of the key/value heads each GPU holds
    matrices, split_elems, replicated_elems = [], 0.0, 0
    for m in summary.linears:
        if m.kind == "tied-head":
            continue
        how = "replicated" if is_router(m, spec) else split_of(m.name, m.in_features, m.out_features)
        full = m.parameters
        if how == "replicated":
            per_gpu = full
            replicated_elems += full
        elif m.name in KV_ONLY and spec.kv_heads < spec.heads:
            per_gpu = full * kv_share
            split_elems += per_gpu
        elif m.name in FUSED_QKV and spec.kv_heads < spec.heads:
            q_out = spec.heads * spec.head_dim
            per_gpu = m.in_features * m.count * (q_out / t + (m.out_features - q_out) * kv_share)
            split_elems += per_gpu
        else:
            per_gpu = full / t
            split_elems += per_gpu
        matrices.append(TensorSplit(m.name, m.in_features, m.out_features, m.count, how,
                                    math.ceil(per_gpu * size)))
    embedding = summary.groups.get("embedding", 0)
    vocab_part = min(embedding, spec.vocab * spec.hidden)  # vocabulary-parallel embedding
    split_elems += vocab_part / t
    listed = sum(m.parameters for m in summary.linears if m.kind != "tied-head")
    replicated_elems += summary.parameters - listed - vocab_part
    split_bytes = math.ceil(split_elems * size)
    replicated_bytes = math.ceil(replicated_elems * size) + summary.buffer_bytes_at(dtype)
    # two per layer (attention, MLP), three in a decoder layer with cross-attention, one for
    # the vocabulary-parallel embedding
    per_decoder_layer = 3 if spec.kind == "encoder-decoder" else 2
    allreduces = 2 * spec.encoder_layers + per_decoder_layer * spec.layers + 1 if t > 1 else 0
    activation = math.ceil(tokens * spec.hidden * bytes_per_param(_compute(dtype)))
    return TensorParallel(t, dtype, tuple(matrices), split_bytes, replicated_bytes, split_bytes + replicated_bytes,
                          summary.total_bytes_at(dtype), allreduces, activation)


def _compute(dtype: str) -> str:
    return dtype if dtype in ("float32", "float16", "bfloat16") else "bfloat16"


def links_for(gpu) -> dict[str, float]:
    """The GPU's own interconnect (datasheet, both directions halved), PCIe, the network."""
    links = {gpu.interconnect: gpu.interconnect_gbs / 2}
    pcie = {name: gbs for name, gbs in PCIE_GBS.items() if name != "PCIe 3.0 x16"}
    for name, gbs in {**pcie, **NETWORKS_GBS}.items():
        links.setdefault(name, gbs)
    return links


def communication_seconds(result: TensorParallel, link_gbs: float) -> float:
    """Time of one forward's all-reduces over a link (ring: 2 (t - 1) / t of the data)."""
    return result.allreduces_per_forward * ring_allreduce_seconds(result.allreduce_bytes, result.degree, link_gbs)
