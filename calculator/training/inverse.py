"""The inverse questions: the largest micro-batch that fits, the fewest GPUs; and what the
guide compares a step with: the rule of thumb, the other fine-tuning methods."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from calculator.core.memo import kept_by_inputs
from calculator.models.architecture import ArchSpec
from calculator.models.families import ModelTraits
from calculator.core.search import first_where, fits, largest_fitting
from calculator.models.summary import ModelSummary
from calculator.training.peak import TrainingMemory, training_memory
from calculator.training.setup import GPUS_PER_NODE, METHODS, STRATEGIES, Layout, TrainingSetup, _choice, _layer_count, check_setup

# The inverse questions ---------------------------------------------------------------------

# Kept by their inputs (core/memo.py): the fine-tuning chapter asks the same searches from
# several calculators on every rerun. Results are ints and frozen GpuCounts (~2 KB each).
@kept_by_inputs(maxsize=1024)
def largest_micro_batch(summary: ModelSummary, spec: ArchSpec, capacity: int, setup: TrainingSetup = TrainingSetup(),
                        layout: Layout = Layout(), traits: ModelTraits | None = None, high: int = 4096) -> int:
    """The largest micro-batch whose peak fits per GPU (0: not even one): `capacity` in bytes
    (the allocated peak against it) or a budget.Budget (the reserved peak against the usable
    memory, with its headroom)."""
    check_setup(setup)
    return largest_fitting(capacity, lambda batch: training_memory(
        summary, spec, replace(setup, micro_batch=batch), layout, traits), high)


def strategy_layout(strategy: str, gpus: int, spec: ArchSpec) -> Layout | None:
    """The layout a strategy uses on `gpus` GPUs, or None where it cannot use that many:
    tensor parallelism stays inside a node and must divide the attention heads, pipeline
    parallelism cannot have more stages than layers."""
    _choice("strategy", strategy, STRATEGIES)
    if strategy == "ddp":
        return Layout(gpus)
    if strategy.startswith("zero"):
        offload = strategy == "zero3-offload"
        return Layout(gpus, zero=int(strategy[4]), offload_optimizer=offload, offload_parameters=offload)
    if strategy == "tensor":
        ok = gpus <= GPUS_PER_NODE and spec.heads % gpus == 0
        return Layout(gpus, tensor=gpus) if ok else None
    if strategy == "pipeline":
        return Layout(gpus, pipeline=gpus) if gpus <= _layer_count(spec) else None
    tensor = _node_tensor_size(spec)
    if gpus % tensor or gpus // tensor > _layer_count(spec):
        return None
    return Layout(gpus, tensor=tensor, pipeline=gpus // tensor)


def _node_tensor_size(spec: ArchSpec) -> int:
    """The largest tensor-parallel size inside one node that divides the heads."""
    return max(t for t in range(1, GPUS_PER_NODE + 1) if spec.heads % t == 0)


def candidate_gpu_counts(limit: int = 4096) -> list[int]:
    """1 to 8 GPUs one by one, then whole nodes of 8."""
    return list(range(1, GPUS_PER_NODE + 1)) + list(range(2 * GPUS_PER_NODE, limit + 1, GPUS_PER_NODE))


@dataclass(frozen=True)
class GpuCount:
    strategy: str
    gpus: int  # 0: no count up to `tried` is enough
    memory: TrainingMemory | None
    tried: int = 0  # the largest count the strategy can use (8 for tensor parallelism, the layers for a pipeline)

    def to_json(self) -> dict:
        layout = {}
        if self.memory is not None:
            layout = {"data_parallel": self.memory.data_parallel, "tensor_parallel": self.memory.tensor_parallel,
                      "pipeline_parallel": self.memory.pipeline_parallel, "zero_stage": self.memory.zero_stage,
                      "total_bytes": self.memory.total_bytes}
        return {"strategy": self.strategy, "gpus": self.gpus, "tried_up_to": self.tried, **layout}


@kept_by_inputs(maxsize=1024)
def fewest_gpus(summary: ModelSummary, spec: ArchSpec, capacity: int, strategy: str,
                setup: TrainingSetup = TrainingSetup(), traits: ModelTraits | None = None,
                limit: int = 4096) -> GpuCount:
    """The fewest GPUs of `capacity` bytes each on which `strategy` fits the training step.
    More GPUs never add memory per GPU within a strategy, so a binary search over the
    candidate counts finds the first that fits."""
    check_setup(setup)
    counts = _usable_counts(strategy, spec, limit)

    def memory(n: int) -> TrainingMemory:
        return training_memory(summary, spec, setup, strategy_layout(strategy, n, spec), traits)

    found = first_where(counts, memory, lambda result: fits(capacity, result))
    tried = counts[-1] if counts else 0
    if found is None:
        return GpuCount(strategy, 0, None, tried)
    return GpuCount(strategy, found[0], found[1], tried)


@lru_cache(maxsize=256)
def _usable_counts(strategy: str, spec: ArchSpec, limit: int) -> tuple[int, ...]:
    """The candidate counts a strategy can use on this architecture (519 layouts to try)."""
    counts = tuple(n for n in candidate_gpu_counts(limit) if strategy_layout(strategy, n, spec) is not None)
    return counts[:1] if strategy == "ddp" else counts  # DDP: every GPU holds everything


def rule_of_thumb_split(parameters: int) -> dict[str, int]:
    """The rule of thumb by component: 2 bytes per parameter of weights, 2 of gradients and
    4 of optimizer states (two 16-bit Adam moments)."""
    return {"weights": 2 * parameters, "gradients": 2 * parameters, "optimizer": 4 * parameters}


def rule_of_thumb_bytes(parameters: int) -> int:
    """The conservative rule for full fine-tuning in bfloat16: a model of X billion
    parameters takes 2X GB to load, and training needs four times that (weights, gradients
    and two Adam states, all in 16 bits): 8X GB, i.e. 8 bytes per parameter."""
    return sum(rule_of_thumb_split(parameters).values())


# Full fine-tuning, LoRA and QLoRA side by side ---------------------------------------------

@dataclass(frozen=True)
class MethodMemory:
    """One method's step on the same model, setup and GPUs."""

    method: str
    memory: TrainingMemory
    largest_micro_batch: int | None  # None: no GPU capacity was given

    @property
    def trainable_parameters(self) -> int:
        return self.memory.trainable_parameters

    @property
    def trainable_percent(self) -> float:
        """Trained parameters, in percent of the model's."""
        return 100 * self.memory.trainable_parameters / max(self.memory.parameters, 1)

    def to_json(self) -> dict:
        return {"method": self.method, "trainable_parameters": self.trainable_parameters,
                "weights_bytes": self.memory.weights_bytes, "activations_bytes": self.memory.activations_bytes,
                "total_bytes": self.memory.total_bytes, "largest_micro_batch": self.largest_micro_batch}


def compare_methods(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup = TrainingSetup(),
                    layout: Layout = Layout(), traits: ModelTraits | None = None,
                    capacity: int | None = None) -> dict[str, MethodMemory]:
    """Full fine-tuning, LoRA and QLoRA (METHODS, in that order) with everything else of
    `setup` kept: each one's memory, trained parameters and, given a GPU's `capacity` in
    bytes, its largest micro-batch."""
    compared = {}
    for method in METHODS:
        chosen = replace(setup, method=method)
        memory = training_memory(summary, spec, chosen, layout, traits)
        largest = None if capacity is None else largest_micro_batch(summary, spec, capacity, chosen, layout, traits)
        compared[method] = MethodMemory(method, memory, largest)
    return compared
