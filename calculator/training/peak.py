"""Model states per GPU and the peak: what each GPU holds, on the timeline of one step."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
import math

from calculator.core.errors import CalculatorError
from calculator.core.memo import FrozenDict, kept_by_inputs
from calculator.models.architecture import ArchSpec
from calculator.models.families import ModelTraits, traits_from_config
from calculator.models.summary import TOWER_PARTS, ModelSummary, in_tower
from calculator.training.activations import ActivationModel, activation_model
from calculator.training.quantized import largest_module_parameters, quantized_base_bytes
from calculator.training.setup import PRECISION_BYTES, Layout, TrainingSetup, _layer_count, adapters_in_float32, check_layout, check_setup
from calculator.training.tensors import (
    adapter_parameters, full_tensors, idle_adapter_parameters, lora_modules, lora_tensors, optimizer_state_bytes,
    optimizer_step_temporary,
)

# Model states per GPU ----------------------------------------------------------------------

@dataclass(frozen=True)
class _Stage:
    """One pipeline stage's share of the model: its layers and the parts around them."""

    index: int
    layers: int
    parameters: int  # before tensor parallelism
    front: bool
    back: bool


def is_tower(name: str, spec: ArchSpec) -> bool:
    """A unit of a vision-language model's image side (`in_tower`): its layers are the tower's,
    not the language model's, and a text batch does not run them."""
    return spec.kind != "vision" and in_tower(name)


def tower_parameters(summary: ModelSummary, spec: ArchSpec) -> int:
    """A vision-language model's image side (tower and projector): a text batch never reaches
    it, so it gets no gradient (.grad stays None, checked on a real Gemma 3 on the CPU) and
    AdamW keeps no state for it: full fine-tuning on text trains the language model alone."""
    units = sum(u.parameters for u in summary.units if is_tower(u.name, spec))
    # a matrix held by the projector module itself (Gemma 3's mm_input_projection_weight) is in no unit
    loose = sum(m.parameters for m in summary.linears if m.name in TOWER_PARTS) if units else 0
    return units + loose


def is_language_layer(name: str, spec: ArchSpec) -> bool:
    """One of the model's own transformer layers (a unit named ...layers.N), a vision tower's excepted."""
    return name.split(".")[-1].isdigit() and not is_tower(name, spec)


@kept_by_inputs(maxsize=256)  # the same few a model, asked for by every peak
def _stages(summary: ModelSummary, spec: ArchSpec, pipeline: int) -> tuple[_Stage, ...]:
    """The layers each stage runs: the language model's (a vision tower's weights sit with the
    embeddings, before the first layer; its layers keep no activations of a text batch)."""
    layer_units = [u for u in summary.units if is_language_layer(u.name, spec)]
    total_layers = len(layer_units) or _layer_count(spec)
    layer_params = sum(u.parameters for u in layer_units) if layer_units else summary.parameters
    outside = summary.parameters - layer_params
    first = next((i for i, u in enumerate(summary.units) if is_language_layer(u.name, spec)), 0)
    front = sum(u.parameters for u in summary.units[:first] if not is_language_layer(u.name, spec))
    back = outside - front
    tied = next((m.in_features * m.out_features for m in summary.linears if m.kind == "tied-head"), 0)
    per_layer = layer_params / total_layers
    stages = []
    for index in range(pipeline):
        count = total_layers // pipeline + (1 if index < total_layers % pipeline else 0)
        params = per_layer * count
        if index == 0:
            params += front
        if index == pipeline - 1:
            params += back + (tied if pipeline > 1 else 0)  # the last stage keeps a copy of tied embeddings
        stages.append(_Stage(index, count, math.ceil(params), index == 0, index == pipeline - 1))
    return tuple(stages)


def _tensor_share(summary: ModelSummary, parameters: int, tensor: int) -> int:
    """Parameters one GPU of a tensor-parallel group holds: matrices, embeddings and biases
    split t ways, norms replicated."""
    if tensor == 1:
        return parameters
    replicated = (summary.groups.get("norm", 0) + summary.groups.get("other", 0)) / max(summary.parameters, 1)
    return math.ceil(parameters * replicated + parameters * (1 - replicated) / tensor)


# What a GPU holds, component by component, in the order the guide stacks them; the float32
# master copy apart from the working weights.
PEAK_COMPONENTS = ("weights", "master", "gradients", "optimizer", "activations", "buffers", "temporary")


@dataclass(frozen=True)
class TrainingMemory:
    """Per GPU (the one that holds the most). Component sizes are what each GPU holds in
    full; total_bytes is the peak, when not everything is alive at once: at_peak says what
    is, and adds up to total_bytes."""

    weights_bytes: int  # stored weights plus the float32 master copy
    master_weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int  # kept for the backward pass at the end of the forward, logits included
    buffers_bytes: int  # DDP gradient buckets, ZeRO-3 gathered layer
    temporary_bytes: int  # in flight at the peak
    total_bytes: int
    peak_phase: str  # forward-backward or optimizer-step
    peak_moment: str  # loss (start of the backward), end of the forward (loss), last layer, first layer, optimizer step
    forward_backward_bytes: int
    optimizer_step_bytes: int
    cpu_bytes: int  # offloaded to the host, this GPU's share
    at_peak: FrozenDict  # a dict nothing can change: the result is kept and shared (core/memo.py)
    parameters: int
    trainable_parameters: int
    gpus: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    zero_stage: int
    pipeline_stage: int

    @property
    def steady_bytes(self) -> int:
        """Held from one step to the next: the weights (with the master copy) and the optimizer
        states. The rest comes and goes (budget.py reserves a share of it for fragmentation)."""
        return self.weights_bytes + self.optimizer_bytes

    @property
    def model_state_bytes(self) -> int:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    def components(self) -> dict[str, int]:
        """What each GPU holds in full, by component (PEAK_COMPONENTS but the temporaries), the
        master copy apart: weights are the stored weights and the model's buffers."""
        return {"weights": self.weights_bytes - self.master_weights_bytes, "master": self.master_weights_bytes,
                "gradients": self.gradients_bytes, "optimizer": self.optimizer_bytes,
                "activations": self.activations_bytes, "buffers": self.buffers_bytes}

    def peak_components(self) -> dict[str, int]:
        """What each GPU holds at its peak, by component (PEAK_COMPONENTS, in that order): at_peak
        with the master copy apart from the weights (where the weights held at the peak include
        it). Adds up to total_bytes."""
        at_peak = self.at_peak
        master = self.master_weights_bytes if at_peak["weights"] >= self.master_weights_bytes else 0
        return {"weights": at_peak["weights"] - master, "master": master,
                **{name: at_peak[name] for name in PEAK_COMPONENTS[2:]}}

    def to_json(self) -> dict:
        return asdict(self)


def model_traits_default(summary: ModelSummary) -> ModelTraits:
    return traits_from_config(None, summary.model_type)


# ~1.5 KB an entry (TrainingMemory, its at_peak and its key; tracemalloc): the fine-tuning chapter asks ~470 peaks a
# rerun (largest micro-batches, fewest GPUs per strategy), most of them the same as the last
# rerun's; 4,096 cover several readers' cases (~6 MB at most).
@kept_by_inputs(maxsize=4096)
def training_memory(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup = TrainingSetup(),
                    layout: Layout = Layout(), traits: ModelTraits | None = None) -> TrainingMemory:
    """Peak memory of one training step in its steady state (optimizer states exist), per
    GPU, and what each component takes."""
    check_setup(setup)
    check_layout(layout, spec)
    check_fused_head(summary, setup)
    traits = traits or model_traits_default(summary)
    results = [_stage_memory(summary, spec, setup, layout, traits, stage)
               for stage in _distinct_stages(_stages(summary, spec, layout.pipeline))]
    return max(results, key=lambda r: r.total_bytes)


def check_fused_head(summary: ModelSummary, setup: TrainingSetup) -> None:
    """trl's fused head reads the head's weight itself, which would skip an adapter on it: its
    SFTTrainer refuses LoRA on lm_head with that loss (trl 1.16, sft_trainer.py:1066; 1.10's
    chunked_nll the same way), and so does the calculator."""
    if setup.loss != "fused" or setup.method == "full":
        return
    heads = [m.name for m in lora_modules(summary, setup.lora_targets) if m.kind in ("head", "tied-head")]
    if heads:
        raise CalculatorError("fused_loss_head_adapter", name=heads[0][:40])


def _distinct_stages(stages: tuple[_Stage, ...]) -> list[_Stage]:
    """The first, the last and one middle stage: the others repeat the middle one."""
    picked = {0: stages[0], len(stages) - 1: stages[-1]}
    if len(stages) > 2:
        picked[1] = stages[1]
    return list(picked.values())


@dataclass(frozen=True)
class _States:
    """Model states of one GPU: what stays there, what waits on the CPU."""

    weights: int  # stored weights, master copy and the model's buffers
    master: int
    optimizer: int
    grads_backward: int  # gradients while the backward pass runs
    grads: int  # gradients at the optimizer step (DeepSpeed adds a float32 copy then)
    buffers: int  # DDP's gradient buckets, ZeRO-3's gathered layer
    step_buffers: int
    cpu: int
    trainable: int  # trainable parameters held by this GPU (before ZeRO)
    trainable_total: int
    tensors: tuple


def _model_states(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup, layout: Layout,
                  stage: _Stage) -> _States:
    """Weights, master copy, gradients and optimizer states of one GPU: split by tensor and
    pipeline parallelism first, then by ZeRO over the data-parallel GPUs."""
    p = PRECISION_BYTES[setup.precision]
    t, d = layout.tensor, layout.data
    deepspeed = layout.accounting == "deepspeed"
    held = _tensor_share(summary, stage.parameters, t)  # parameters on this GPU before ZeRO
    share = stage.parameters / max(summary.parameters, 1) / t
    if setup.method == "full":  # the tower, frozen, sits on the first stage in the working precision
        tower = tower_parameters(summary, spec)
        frozen = _tensor_share(summary, tower, t) if stage.front else 0
        tensors, trainable_total, trainable = full_tensors(summary, spec), summary.parameters - tower, held - frozen
        base, idle_held = frozen * p.weight, 0
    else:
        tensors = lora_tensors(summary, setup.lora_rank, setup.lora_targets, spec)  # those a text batch trains
        # adapters on a vision-language model's tower: weights on the first stage, nothing else
        idle = idle_adapter_parameters(summary, spec, setup)
        trained_total = sum(x.parameters for x in tensors)
        trainable_total = trained_total + idle  # as peft counts them
        trainable = math.ceil(trained_total * share)
        idle_held = math.ceil(idle / t) if stage.front else 0
        kept = 4 if setup.method == "qlora" and setup.kbit_prepare else p.weight  # prepare_model_for_kbit_training
        base = held * p.weight if setup.method == "lora" else \
            math.ceil(quantized_base_bytes(summary, kept, setup.double_quant, spec) * share)
    trained = p  # what the trained parameters are stored in
    if adapters_in_float32(setup):  # peft's float32 adapters: float32 weights, gradients and states
        trained = replace(p, weight=4, grad=4, master=0, state=4)

    def shard(size: int, from_stage: int) -> int:
        return math.ceil(size / d) if layout.zero >= from_stage else size

    working, master = (trainable + idle_held) * trained.weight, trainable * trained.master
    states = math.ceil(optimizer_state_bytes(tensors, setup.optimizer, trained.state) * trainable
                       / max(sum(x.parameters for x in tensors), 1))  # the tensors' share this GPU trains
    grads16 = trainable * trained.grad
    # DeepSpeed converts the 16-bit gradients to float32 for the optimizer (its partition of them)
    fp32_grads = shard(trainable * 4, 1) if (deepspeed and p.master) else 0

    weights, optimizer = shard(working + base, 3) + shard(master, 1), shard(states, 1)
    grads_backward = shard(grads16, 2)
    if layout.zero == 3 and deepspeed:
        grads_backward = 0  # reduced straight into the float32 partition
    if layout.zero == 2 and deepspeed:
        grads_backward = grads16  # DeepSpeed's estimator keeps room for every 16-bit gradient
    grads = grads_backward + fp32_grads
    cpu = 0
    if layout.offload_optimizer:
        cpu += shard(master, 1) + shard(states, 1) + math.ceil(trainable * 4 / d)
        weights, optimizer = weights - shard(master, 1), 0
        grads = grads_backward = 0 if layout.zero >= 2 else grads16
    if layout.offload_parameters:
        cpu += shard(working + base, 3)
        weights = 0
    weights += summary.buffer_bytes_at("float32" if p.weight == 4 else "bfloat16")

    buckets = grads16 if (layout.zero == 0 and d > 1) else 0  # DDP, gradient_as_bucket_view=False
    buffers = buckets
    if layout.zero == 3:  # the largest layer gathered in 16 bits (DeepSpeed's estimator adds its gradients)
        buffers = math.ceil((4 if deepspeed else 2) * largest_module_parameters(summary, spec) / t)
    return _States(weights=weights, master=0 if layout.offload_optimizer else shard(master, 1), optimizer=optimizer,
                   grads_backward=grads_backward, grads=grads, buffers=buffers, step_buffers=buckets, cpu=cpu,
                   trainable=trainable, trainable_total=trainable_total, tensors=tensors)


def _backward_moments(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup, layout: Layout,
                      model: ActivationModel, stage: _Stage, states: _States) -> tuple[int, dict]:
    """Activations this stage keeps, and the moments of the forward and backward pass that
    compete for the peak: moment -> (activations kept, gradients in flight, parameter
    gradients). Gradients appear layer after layer while activations are released: the start
    of the backward (the loss's float32 gradients), the final norm, the last layer (every
    layer's activations still kept) and the first (nearly every gradient already there),
    each inside its MLP half, attention half and their norms."""
    # 1F1B keeps min(p - stage, micro-batches) micro-batches in flight on a pipeline stage.
    in_flight = min(layout.pipeline - stage.index, max(setup.gradient_accumulation, 1))
    per_layer = model.layer_bytes(setup.checkpointing)
    front = (model.embedding_bytes - model.first_layer_saving) if stage.front else 0
    micro = stage.layers * per_layer + front + (model.head_bytes if stage.back else 0)
    others = (in_flight - 1) * micro
    activations = others + micro

    growing = 0 if _accumulates(setup, layout) else states.grads_backward
    per_trainable = growing / max(states.trainable, 1)
    head_grads = math.ceil(_head_trainable(summary, setup, layout.tensor) * per_trainable) if stage.back else 0
    front_grads = math.ceil(_front_trainable(summary, spec, setup, layout.tensor) * per_trainable) if stage.front else 0
    layer_grads = max(growing - head_grads - front_grads, 0) / max(stage.layers, 1)
    recompute = model.recompute_extra(setup.checkpointing)
    moments = {}
    if stage.back and model.logits_gradient:
        moments["loss"] = (activations, model.logits_gradient, 0)
    if stage.back and model.loss_forward:  # torchtune's chunked loss: its 16-bit logits, before the backward
        moments["end of the forward (loss)"] = (activations, model.loss_forward, 0)
    if setup.checkpointing == "full" and setup.method == "full" and model.weight_copies_per_layer:
        # autocast caches the 16-bit copy of every weight that requires a gradient until its
        # context exits at the end of the forward (frozen LoRA bases are cast again at each use);
        # with full recomputation no saved tensor holds them after that
        copies = stage.layers * model.weight_copies_per_layer + (model.head_weight_copy if stage.back else 0)
        moments["end of the forward (autocast's weight copies)"] = (activations + copies, 0, 0)
    if stage.back:  # once the loss and the head have released theirs
        after_head = activations - model.loss_saved - model.labels_saved - model.head_weight_copy
        moments["final norm"] = (after_head, model.norm_flow, min(head_grads, growing))
    rest_last = activations - (model.head_bytes if stage.back else 0)
    rest_first = others + per_layer + front
    before_first = math.ceil(growing - front_grads - layer_grads)  # all but the first layer's and the embeddings'
    for inner in model.moments:
        in_layer = math.ceil(inner.weight_parameters * per_trainable) if setup.method == "full" else 0
        flow = inner.flow + model.residual_gradient
        moments[f"last layer ({inner.name})"] = (rest_last + recompute - inner.released, flow,
                                                 min(growing, head_grads + in_layer))
        moments[f"first layer ({inner.name})"] = (rest_first + recompute - inner.released, flow,
                                                  min(growing, before_first + in_layer))
    return activations, moments


def _accumulates(setup: TrainingSetup, layout: Layout) -> bool:
    """Gradients live across micro-batches: accumulation, every pipeline, and gradients that
    zero_grad() zeroes in place instead of freeing (torch 1.x)."""
    return setup.gradient_accumulation > 1 or layout.pipeline > 1 or not setup.grads_set_to_none


def _stage_memory(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup, layout: Layout,
                  traits: ModelTraits, stage: _Stage) -> TrainingMemory:
    states = _model_states(summary, spec, setup, layout, stage)
    model = activation_model(summary, spec, traits, setup, layout.tensor, layout.sequence_parallel)
    activations, moments = _backward_moments(summary, spec, setup, layout, model, stage, states)
    accumulated = states.grads_backward if _accumulates(setup, layout) else 0
    persistent = states.weights + states.optimizer + states.buffers + accumulated
    moment = max(moments, key=lambda key: sum(moments[key]))
    kept, in_flight, grads_at = moments[moment]
    forward_backward = persistent + kept + in_flight + grads_at

    # The optimizer step: every gradient, the states and the optimizer's temporaries (under
    # ZeRO, DeepSpeed's fused optimizer has none).
    temp = 0
    if layout.zero == 0:
        temp = math.ceil(optimizer_step_temporary(states.tensors, setup.optimizer, setup.optimizer_impl,
                                                  PRECISION_BYTES[setup.precision].state)
                         * states.trainable / max(sum(x.parameters for x in states.tensors), 1))
    step = states.weights + states.grads + states.optimizer + states.step_buffers + temp

    if forward_backward >= step:
        phase, total, temporary = "forward-backward", forward_backward, in_flight
        at_peak = {"weights": states.weights, "gradients": grads_at + accumulated, "optimizer": states.optimizer,
                   "activations": kept, "buffers": states.buffers, "temporary": temporary}
    else:
        phase, total, temporary, moment = "optimizer-step", step, temp, "optimizer step"
        at_peak = {"weights": states.weights, "gradients": states.grads, "optimizer": states.optimizer,
                   "activations": 0, "buffers": states.step_buffers, "temporary": temp}
    return TrainingMemory(
        weights_bytes=states.weights, master_weights_bytes=states.master, gradients_bytes=states.grads,
        optimizer_bytes=states.optimizer, activations_bytes=activations, buffers_bytes=states.buffers,
        temporary_bytes=temporary, total_bytes=total, peak_phase=phase, peak_moment=moment,
        forward_backward_bytes=forward_backward, optimizer_step_bytes=step, cpu_bytes=states.cpu, at_peak=FrozenDict(at_peak),
        parameters=summary.parameters, trainable_parameters=states.trainable_total, gpus=layout.gpus,
        data_parallel=layout.data, tensor_parallel=layout.tensor, pipeline_parallel=layout.pipeline,
        zero_stage=layout.zero, pipeline_stage=stage.index)


def _head_trainable(summary: ModelSummary, setup: TrainingSetup, tensor: int) -> int:
    """Trainable parameters of the output head (and final norm): their gradients come first."""
    if setup.method == "full":
        return math.ceil(sum(m.parameters for m in summary.linears if m.kind in ("head", "tied-head")) / tensor)
    adapted = [m for m in lora_modules(summary, setup.lora_targets) if m.kind in ("head", "tied-head")]
    return math.ceil(sum(adapter_parameters(m, setup.lora_rank) for m in adapted) / tensor)


def _front_trainable(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup, tensor: int) -> int:
    """Trainable parameters before the first layer (embeddings): their gradients come last.
    A tied head's are already counted with the head."""
    if setup.method != "full" or any(m.kind == "tied-head" for m in summary.linears):
        return 0
    return math.ceil(summary.groups.get("embedding", 0) / tensor)
