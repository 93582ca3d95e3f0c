"""Memory of training and fine-tuning, per GPU.

Every figure is derived from the real model: its weight matrices (ModelSummary.linears), its
parameter groups, and its shape (ArchSpec: heads, key/value heads, hidden size, MLP width
and gating, experts, vocabulary). A step holds:

- weights: the stored weights (16-bit, float32, or 4-bit NF4 for QLoRA's frozen base) and,
  under mixed precision, the float32 master copy the optimizer updates;
- gradients, one per trainable parameter (16-bit under mixed precision);
- optimizer states: AdamW (two), 8-bit AdamW as bitsandbytes stores it, SGD with momentum
  (one), Adafactor (factored second moments: rows + columns of each matrix);
- activations kept for the backward pass, tensor by tensor as transformers' layers keep
  them (norms, projections, attention, MLP, dropout masks), with no recomputation,
  selective recomputation or full checkpointing, and the float32 logits of the loss;
- temporaries: gradients flowing through a layer, the logits' gradients, the optimizer's
  intermediate results, communication and gather buffers.

The peak is found on a timeline rather than by adding everything: gradients appear while
activations are released during the backward pass, and gradients are freed before the next
forward. Two phases compete: the backward pass and the optimizer step.

Distribution: plain data parallelism (PyTorch DDP keeps a bucket copy of the gradients),
ZeRO stages 1-3 (Rajbhandari et al., SC 2020) with CPU offload of the optimizer (Ren et al.,
ZeRO-Offload, 2021) or of the parameters, Megatron-style tensor parallelism with sequence
parallelism and pipeline parallelism with the 1F1B schedule (Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models", 2022; Narayanan et al., SC 2021), and
their combinations. Figures are per GPU, for the GPU that holds the most.

All sizes in bytes. Pure Python: nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
import math
import re

from .architecture import ArchSpec
from .errors import CalculatorError
from .families import ModelTraits, traits_from_config
from .search import first_where, largest_fitting
from .summary import Linear, ModelSummary

# Choices, written as they appear in URLs and on the command line (language-neutral).
PRECISIONS = ("mixed", "bfloat16", "float32", "amp")
OPTIMIZERS = ("adamw", "adamw-8bit", "sgd", "adafactor")
METHODS = ("full", "lora", "qlora")
CHECKPOINTING = ("none", "selective", "full")
ATTENTION = ("sdpa", "eager")
OPTIMIZER_IMPLS = ("fused", "foreach", "for-loop")
DEVICES = ("cuda", "cpu")
ACCOUNTINGS = ("paper", "deepspeed")
STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "zero3-offload", "tensor", "pipeline", "tensor-pipeline")
ZERO_STAGES = (0, 1, 2, 3)
ALL_LINEAR = "all-linear"

MAX_TOKENS = 10**7
MAX_BATCH = 10**5
MAX_GPUS = 100_000
MAX_RANK = 65_536
GPUS_PER_NODE = 8  # tensor parallelism stays inside a node (NVLink)


@dataclass(frozen=True)
class Precision:
    """Bytes per element of what a training step stores, for one precision recipe."""

    weight: int  # the stored (working) weights
    grad: int
    master: int  # float32 master copy kept by the optimizer (0: none)
    state: int  # one optimizer state element (AdamW moments, SGD momentum, Adafactor)
    act: int  # what the matrix products produce


# mixed: 16-bit weights and gradients, float32 master weights and optimizer states (DeepSpeed,
#   Megatron, the ZeRO paper's 2 + 2 + 12 bytes per parameter).
# bfloat16: a model loaded in bfloat16 and trained as it is: everything in 16 bits.
# float32: everything in 4 bytes.
# amp: float32 weights, gradients and states; products in 16 bits under torch.autocast
#   (the Trainer's bf16=True on a float32 model).
PRECISION_BYTES = {
    "mixed": Precision(weight=2, grad=2, master=4, state=4, act=2),
    "bfloat16": Precision(weight=2, grad=2, master=0, state=2, act=2),
    "float32": Precision(weight=4, grad=4, master=0, state=4, act=4),
    "amp": Precision(weight=4, grad=4, master=0, state=4, act=2),
}

# bitsandbytes: 8-bit optimizer states in blocks of 256 values with a float32 scale each;
# tensors under 4,096 values keep float32 states (min_8bit_size).
BNB_BLOCK = 256
BNB_MIN_8BIT = 4096
BNB_QMAPS_BYTES = 2 * 256 * 4  # the two quantization maps, shared by every tensor
# NF4 (QLoRA): two weights per byte, one float32 scale per block of 64; with double
# quantization the scales are stored in 8 bits, in blocks of 256 with a float32 scale each
# (Dettmers et al., "QLoRA", 2023: 0.5 bits per parameter become 0.127).
NF4_BLOCK = 64
NF4_SCALE_BLOCK = 256


@dataclass(frozen=True)
class TrainingSetup:
    """What is trained and how: the choices that do not depend on the GPUs."""

    method: str = "full"
    precision: str = "mixed"
    optimizer: str = "adamw"
    micro_batch: int = 1
    sequence: int = 2048
    checkpointing: str = "none"
    attention: str = "sdpa"
    gradient_accumulation: int = 1  # micro-batches per optimizer step
    lora_rank: int = 16
    lora_targets: str = ALL_LINEAR  # module names (q_proj,v_proj) or "all-linear"
    double_quant: bool = True  # QLoRA's quantized quantization constants
    optimizer_impl: str = "fused"  # the Trainer's default with torch >= 2.8
    device: str = "cuda"  # cpu: dropout keeps its mask in the activation dtype


@dataclass(frozen=True)
class Layout:
    """How the GPUs share the work: gpus = data x tensor x pipeline."""

    gpus: int = 1
    tensor: int = 1
    pipeline: int = 1
    zero: int = 0
    offload_optimizer: bool = False
    offload_parameters: bool = False
    sequence_parallel: bool = True  # with tensor parallelism (Megatron's recommendation)
    # paper: the ZeRO paper's model states (K = 12 bytes per parameter for mixed-precision
    # Adam); deepspeed: DeepSpeed's own estimator, which also counts a float32 copy of the
    # gradients and, before stage 3, room for every 16-bit gradient.
    accounting: str = "paper"

    @property
    def data(self) -> int:
        return self.gpus // (self.tensor * self.pipeline)


# Tensors of n x intermediate that an activation function keeps for its backward, besides its
# output: SiLU and GELU keep their input; ReLU keeps only its output; the tanh GELU written
# in Python (gelu_new, GPT-2's) keeps its input and three intermediate results.
ACTIVATION_KEEPS = {"silu": 1, "swish": 1, "gelu": 1, "gelu_pytorch_tanh": 1, "gelu_python": 1, "relu": 0,
                    "gelu_new": 4, "gelu_fast": 4, "quick_gelu": 2, "gelu_accurate": 4, "tanh": 0, "sigmoid": 0}
# Module names that say what a weight matrix does (others are read from their shapes).
NAME_ROLES = {
    "q_proj": "attn_in", "k_proj": "attn_in", "v_proj": "attn_in", "qkv_proj": "attn_in", "c_attn": "attn_in",
    "query_key_value": "attn_in", "query": "attn_in", "key": "attn_in", "value": "attn_in", "q": "attn_in",
    "k": "attn_in", "v": "attn_in", "Wqkv": "attn_in", "W_pack": "attn_in", "q_a_proj": "attn_in",
    "kv_a_proj_with_mqa": "attn_in", "q_b_proj": "attn_inner", "kv_b_proj": "attn_inner",
    "o_proj": "attn_out", "out_proj": "attn_out", "o": "attn_out",
    "gate_proj": "mlp_in", "up_proj": "mlp_in", "gate_up_proj": "mlp_in", "c_fc": "mlp_in", "fc1": "mlp_in",
    "dense_h_to_4h": "mlp_in", "wi": "mlp_in", "wi_0": "mlp_in", "wi_1": "mlp_in", "w1": "mlp_in", "w3": "mlp_in",
    "down_proj": "mlp_out", "fc2": "mlp_out", "dense_4h_to_h": "mlp_out", "wo": "mlp_out", "w2": "mlp_out",
}


def linear_role(linear: Linear, spec: ArchSpec) -> str:
    """attn_in, attn_inner, attn_out, mlp_in, mlp_out, router, head or experts."""
    if linear.kind in ("head", "tied-head"):
        return "head"
    if linear.kind == "experts":
        return "experts"
    if linear.name in NAME_ROLES:
        return NAME_ROLES[linear.name]
    widths = {spec.intermediate, spec.expert_intermediate, spec.shared_expert_intermediate} - {0}
    if linear.in_features in widths and linear.out_features == spec.hidden:
        return "mlp_out"
    if linear.in_features == spec.hidden and spec.experts and linear.out_features == spec.experts:
        return "router"
    if linear.in_features == spec.hidden and linear.out_features in widths | {2 * w for w in widths}:
        return "mlp_in"
    if linear.in_features == spec.hidden:
        return "attn_in"
    if linear.out_features == spec.hidden:
        return "attn_out"
    return "attn_inner"


# Checks ------------------------------------------------------------------------------------

def _choice(name: str, value: object, choices) -> None:
    if value not in choices:
        raise CalculatorError("unknown_choice", name=name, value=str(value)[:30],
                              choices=", ".join(str(c) for c in choices))


def _whole(name: str, value: object, high: int, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise CalculatorError("bad_size", name=name, value=str(value)[:30], high=high)


def check_setup(setup: TrainingSetup) -> None:
    _choice("method", setup.method, METHODS)
    _choice("precision", setup.precision, PRECISIONS)
    _choice("optimizer", setup.optimizer, OPTIMIZERS)
    _choice("checkpointing", setup.checkpointing, CHECKPOINTING)
    _choice("attention", setup.attention, ATTENTION)
    _choice("optimizer implementation", setup.optimizer_impl, OPTIMIZER_IMPLS)
    _choice("device", setup.device, DEVICES)
    _whole("micro-batch", setup.micro_batch, MAX_BATCH)
    _whole("sequence", setup.sequence, MAX_TOKENS)
    _whole("gradient accumulation", setup.gradient_accumulation, 10_000)
    _whole("LoRA rank", setup.lora_rank, MAX_RANK)


def check_layout(layout: Layout, spec: ArchSpec) -> None:
    _whole("number of GPUs", layout.gpus, MAX_GPUS)
    _whole("tensor parallel size", layout.tensor, MAX_GPUS)
    _whole("pipeline parallel size", layout.pipeline, MAX_GPUS)
    _choice("ZeRO stage", layout.zero, ZERO_STAGES)
    _choice("accounting", layout.accounting, ACCOUNTINGS)
    if layout.gpus % (layout.tensor * layout.pipeline):
        raise CalculatorError("bad_layout", gpus=layout.gpus, tensor=layout.tensor, pipeline=layout.pipeline)
    if layout.tensor > 1 and spec.heads % layout.tensor:
        raise CalculatorError("tensor_heads", tensor=layout.tensor, heads=spec.heads)
    if layout.pipeline > _layer_count(spec):
        raise CalculatorError("pipeline_layers", pipeline=layout.pipeline, layers=_layer_count(spec))
    if layout.offload_optimizer and layout.zero == 0:
        raise CalculatorError("offload_needs_zero")
    if layout.offload_parameters and (layout.zero != 3 or not layout.offload_optimizer):
        raise CalculatorError("param_offload_needs_zero3")


def _layer_count(spec: ArchSpec) -> int:
    return max(1, spec.layers + spec.encoder_layers)


# Trainable tensors and the optimizer -------------------------------------------------------

@dataclass(frozen=True)
class TensorGroup:
    """`count` trainable tensors of rows x cols (cols = 1 for vectors)."""

    rows: int
    cols: int
    count: int

    @property
    def numel(self) -> int:
        return self.rows * self.cols

    @property
    def parameters(self) -> int:
        return self.numel * self.count


def full_tensors(summary: ModelSummary, spec: ArchSpec) -> tuple[TensorGroup, ...]:
    """Every parameter of the model as tensors: weight matrices with their real shapes,
    embeddings (rows x hidden), norm vectors, and the rest (biases...) as one vector."""
    groups = [TensorGroup(m.out_features, m.in_features, m.count) for m in summary.linears
              if m.kind in ("linear", "experts", "head")]
    hidden = max(spec.hidden, 1)
    embedding = summary.groups.get("embedding", 0)
    if embedding:
        groups.append(TensorGroup(embedding // hidden, hidden, 1) if embedding % hidden == 0
                      else TensorGroup(embedding, 1, 1))
    norm = summary.groups.get("norm", 0)
    if norm >= hidden:
        groups.append(TensorGroup(hidden, 1, norm // hidden))
    rest = summary.parameters - sum(g.parameters for g in groups)
    if rest > 0:
        groups.append(TensorGroup(rest, 1, 1))
    return tuple(groups)


def lora_modules(summary: ModelSummary, targets: str = ALL_LINEAR) -> tuple[Linear, ...]:
    """The weight matrices LoRA adapts. "all-linear" follows peft: every linear layer but
    the output head, and the fused expert matrices of transformers' mixtures of experts.
    Otherwise names of linear modules (q_proj, v_proj...), as peft's target_modules."""
    if not isinstance(targets, str) or not targets.strip():
        raise CalculatorError("lora_no_targets")
    names = [n for n in re.split(r"[\s,]+", targets.strip()) if n]
    if names == [ALL_LINEAR]:
        chosen = tuple(m for m in summary.linears if m.kind in ("linear", "experts"))
    else:
        known = {m.name for m in summary.linears if m.kind in ("linear", "head", "tied-head")}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise CalculatorError("lora_unknown_target", name=unknown[0][:40],
                                  choices=", ".join(sorted(known))[:400])
        chosen = tuple(m for m in summary.linears if m.name in names and m.kind in ("linear", "head", "tied-head"))
    if not chosen:
        raise CalculatorError("lora_no_targets")
    return chosen


def lora_rank_of(module: Linear, rank: int) -> int:
    """peft gives a fused gate-and-up expert matrix twice the rank: r for each half."""
    return 2 * rank if module.kind == "experts" and "gate_up" in module.name else rank


def lora_parameters(summary: ModelSummary, rank: int, targets: str = ALL_LINEAR) -> int:
    """LoRA adds A (rank x in) and B (out x rank) to each adapted matrix (Hu et al., 2021)."""
    return sum(m.count * lora_rank_of(m, rank) * (m.in_features + m.out_features)
               for m in lora_modules(summary, targets))


def lora_tensors(summary: ModelSummary, rank: int, targets: str) -> tuple[TensorGroup, ...]:
    groups = []
    for m in lora_modules(summary, targets):
        r = lora_rank_of(m, rank)
        groups += [TensorGroup(r, m.in_features, m.count), TensorGroup(m.out_features, r, m.count)]
    return tuple(groups)


def optimizer_state_bytes(tensors, optimizer: str, state_bytes: int) -> int:
    """Optimizer states for these trainable tensors.
    AdamW: first and second moments. 8-bit AdamW (bitsandbytes): both moments in one byte,
    a float32 scale per block of 256 values, float32 moments for tensors under 4,096 values.
    SGD: one momentum buffer. Adafactor (Shazeer & Stern, 2018): no first moment, and for a
    matrix only the running mean of each row and of each column of the squared gradient."""
    _choice("optimizer", optimizer, OPTIMIZERS)
    total = 0
    for t in tensors:
        if optimizer == "adamw":
            total += 2 * t.parameters * state_bytes
        elif optimizer == "sgd":
            total += t.parameters * state_bytes
        elif optimizer == "adafactor":
            per = (t.rows + t.cols) if t.cols > 1 else t.numel
            total += per * t.count * state_bytes
        elif t.numel < BNB_MIN_8BIT:
            total += 2 * t.parameters * 4
        else:
            total += 2 * t.count * (t.numel + 4 * math.ceil(t.numel / BNB_BLOCK))
    if optimizer == "adamw-8bit":
        total += BNB_QMAPS_BYTES
    return total


def optimizer_step_temporary(tensors, optimizer: str, impl: str, state_bytes: int) -> int:
    """Intermediate results of one optimizer step (PyTorch's implementations).
    fused: none. for-loop (one tensor at a time): AdamW computes sqrt(v) and its scaled copy
    while the previous tensor's result is still referenced; Adafactor builds the full-size
    estimate of a matrix (a vector: its squared gradient and a copy); SGD updates in place.
    foreach (all tensors at once): AdamW's sqrt(v) for every tensor, Adafactor's estimate
    for every tensor. bitsandbytes' 8-bit kernels update in place."""
    if impl == "fused" or optimizer in ("sgd", "adamw-8bit") or not tensors:
        return 0
    if impl == "foreach":
        return sum(t.parameters for t in tensors) * state_bytes
    if optimizer == "adamw":
        own = lambda t: 2 * t.numel  # noqa: E731
    else:
        own = lambda t: t.numel if t.cols > 1 else 2 * t.numel  # noqa: E731
    # Tensors repeated in every layer come one after the other, in the model's order.
    layer = [t for t in tensors if t.count > 1]
    held = max([own(t) for t in tensors] + [prev.numel + own(cur) for prev, cur in zip(layer, layer[1:])])
    return held * state_bytes


# Quantized base (QLoRA) --------------------------------------------------------------------

def nf4_bytes(rows: int, cols: int, double_quant: bool = True) -> int:
    """One matrix in bitsandbytes' NF4: packed values plus its quantization constants."""
    numel = rows * cols
    blocks = math.ceil(numel / NF4_BLOCK)
    constants = blocks * 4
    if double_quant:  # 8-bit scales, a float32 scale per 256 of them, and their mean
        constants = blocks + 4 * math.ceil(blocks / NF4_SCALE_BLOCK) + 4
    return math.ceil(numel / 2) + constants


def quantized_base_bytes(summary: ModelSummary, keep_bytes: int, double_quant: bool = True) -> int:
    """QLoRA's frozen base: the layers' matrices in NF4 (transformers keeps the output head
    in 16 bits); embeddings, norms, biases and the head at `keep_bytes` per parameter."""
    quantized = [m for m in summary.linears if m.kind in ("linear", "experts")]
    nf4 = sum(m.count * nf4_bytes(m.out_features, m.in_features, double_quant) for m in quantized)
    kept = summary.parameters - sum(m.parameters for m in quantized)
    return nf4 + kept * keep_bytes


def largest_module_parameters(summary: ModelSummary, spec: ArchSpec) -> int:
    """Parameters of the largest single module, as DeepSpeed's estimator counts them (the
    parameters a module holds itself): a weight matrix, an embedding, or one layer's fused
    experts (transformers keeps all the experts of a layer in one module)."""
    sizes = [m.in_features * m.out_features for m in summary.linears if m.kind != "experts"]
    experts = sum(m.parameters for m in summary.linears if m.kind == "experts")
    if experts:
        sizes.append(math.ceil(experts / _layer_count(spec)))
    sizes += [u.parameters for u in summary.units if not u.name.split(".")[-1].isdigit()]
    return max(sizes or [summary.parameters])


# Activations -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Saved:
    """One kind of tensor kept for the backward pass, in bytes per layer or per model part."""

    name: str
    bytes: int
    tensor_parallel: bool = True  # split by tensor parallelism (else only by sequence parallelism)
    quadratic: bool = False  # grows with sequence^2: dropped by selective recomputation
    part: str = "attention"  # the half of the layer it belongs to: attention or mlp

    @property
    def group(self) -> str:
        """norm, attention, scores, mlp, dropout or lora: what the guide's tables sum up."""
        if self.quadratic:
            return "scores"
        for group, marker in (("dropout", "dropout"), ("norm", "norm"), ("lora", "LoRA"), ("attention", "attention")):
            if marker in self.name:
                return group
        return "mlp"


@dataclass(frozen=True)
class Moment:
    """A moment inside one layer's backward pass: what that layer has already released, the
    gradients in flight, and the parameters whose gradients exist by then in that layer."""

    name: str  # mlp or attention (the MLP half runs first)
    released: int
    flow: int
    weight_parameters: int


@dataclass(frozen=True)
class ActivationModel:
    """What one micro-batch keeps: per transformer layer (averaged over the model's layers),
    before the first layer (embeddings) and after the last (final norm, head, loss)."""

    layer: tuple[Saved, ...]
    embedding: tuple[Saved, ...]
    head: tuple[Saved, ...]
    moments: tuple[Moment, ...]
    norm_flow: int  # gradients in flight inside a norm's backward (the final norm's too)
    logits_gradient: int  # float32 gradients of the logits at the start of the backward
    residual_gradient: int  # the residual stream's gradient, alive through every layer
    layer_input: int  # what full checkpointing keeps per layer
    weight_copies_per_layer: int  # autocast's 16-bit copies of the weights (amp only)
    head_weight_copy: int
    first_layer_saving: int = 0  # what the first layer need not keep when nothing before it trains

    @property
    def layer_full(self) -> int:
        """Every tensor one layer keeps without recomputation (plus autocast's copies)."""
        return sum(s.bytes for s in self.layer) + self.weight_copies_per_layer

    def layer_bytes(self, checkpointing: str) -> int:
        """Bytes one layer keeps from its forward to its backward."""
        if checkpointing == "full":
            return self.layer_input
        dropped = sum(s.bytes for s in self.layer if s.quadratic) if checkpointing == "selective" else 0
        return self.layer_full - dropped

    def recompute_extra(self, checkpointing: str) -> int:
        """A layer about to run its backward holds everything again: what was dropped is
        recomputed (and full checkpointing still holds the layer's input meanwhile)."""
        return self.layer_full - self.layer_bytes(checkpointing) + (self.layer_input if checkpointing == "full" else 0)

    @property
    def embedding_bytes(self) -> int:
        return sum(s.bytes for s in self.embedding)

    @property
    def head_bytes(self) -> int:
        return sum(s.bytes for s in self.head) + self.head_weight_copy

    @property
    def loss_saved(self) -> int:
        return sum(s.bytes for s in self.head if s.name.startswith("loss"))

    @property
    def labels_saved(self) -> int:
        return sum(s.bytes for s in self.head if s.name == "labels")


@dataclass(frozen=True)
class _Adapted:
    """Which matrices are trained (full fine-tuning) or carry a LoRA adapter."""

    full: bool
    roles: frozenset = frozenset()
    rank: int = 0
    adapters_per_layer: dict = field(default_factory=dict)  # role -> adapted matrices per layer

    def keeps_input(self, role: str) -> bool:
        return self.full or role in self.roles


def _adapted(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup) -> _Adapted:
    if setup.method == "full":
        return _Adapted(full=True)
    layers = _layer_count(spec)
    per_layer: dict[str, float] = {}
    for m in lora_modules(summary, setup.lora_targets):
        role = linear_role(m, spec)
        per_layer[role] = per_layer.get(role, 0) + m.count / (1 if role == "head" else layers)
    return _Adapted(full=False, roles=frozenset(per_layer), rank=setup.lora_rank, adapters_per_layer=per_layer)


def _readers(summary: ModelSummary, spec: ArchSpec) -> tuple[int, int]:
    """How many matrices of a layer read its attention input and its MLP input (autocast
    casts that input once per reader, and each keeps its own copy)."""
    names = {(m.name, linear_role(m, spec)) for m in summary.linears if m.kind == "linear"}
    attn = sum(1 for _, role in names if role == "attn_in") or 1
    mlp = sum(1 for _, role in names if role == "mlp_in") or 1
    return attn, mlp


def _role_parameters(summary: ModelSummary, spec: ArchSpec, roles: tuple[str, ...]) -> float:
    """Parameters per layer of the matrices with these roles."""
    total = sum(m.parameters for m in summary.linears if linear_role(m, spec) in roles)
    return total / _layer_count(spec)


def activation_model(summary: ModelSummary, spec: ArchSpec, traits: ModelTraits, setup: TrainingSetup,
                     tensor: int = 1, sequence_parallel: bool = True) -> ActivationModel:
    """The tensors a micro-batch keeps, from transformers' implementations: a Llama-style
    RMSNorm keeps its float32 input and normalised copy, SDPA (flash or memory-efficient
    kernels) keeps queries, keys, values, output and the log-sum-exp, eager attention the
    score matrices, the MLP its projections and activation inputs, dropout its masks; a
    frozen matrix keeps nothing for its own gradient (LoRA). With tensor parallelism the
    attention and MLP tensors split t ways, the rest too with sequence parallelism
    (Korthikanti et al., 2022)."""
    p = PRECISION_BYTES[setup.precision]
    amp = setup.precision == "amp"
    a = p.act
    b, s = setup.micro_batch, setup.sequence
    n = b * s
    h = spec.hidden
    heads = max(spec.heads, 1)
    head_dim = spec.head_dim or h // heads
    q_dim = heads * head_dim
    kv_dim = spec.kv_heads * head_dim
    if spec.mla_expanded_dim:  # latent attention: keys and values rebuilt per head
        q_dim = kv_dim = spec.mla_expanded_dim // 3
    residual = 4 if amp else a  # autocast leaves the residual stream in float32
    mask = 1 if setup.device == "cuda" else a  # CUDA keeps a bool mask; the CPU a scaled copy
    rms = traits.norm in ("rms", "gemma")
    # With attention dropout the CPU has no fused SDPA kernel: PyTorch's math path runs, in
    # float32 for 16-bit inputs (torch's _scaled_dot_product_attention_math).
    # The attention transformers really runs: models without SDPA support (Gemma 2's softcapped
    # scores) fall back to eager, as the inference model already assumes.
    attention = setup.attention if spec.sdpa else "eager"
    math_path = attention == "sdpa" and setup.device == "cpu" and traits.attention_dropout > 0
    eager = attention == "eager" or math_path
    adapted = _adapted(summary, spec, setup)
    attn_readers, mlp_readers = _readers(summary, spec)

    def norm(name: str, readers_role: str, readers: int, part: str) -> list[Saved]:
        kept: list[Saved] = []
        if rms:
            kept.append(Saved(f"{name}: float32 input", 4 * n * h, False, part=part))
            kept.append(Saved(f"{name}: 1/rms", 4 * n, False, part=part))
            if adapted.full:  # the weight's gradient needs the normalised values
                size = 4 if (traits.norm == "gemma" or amp) else a
                kept.append(Saved(f"{name}: normalised", size * n * h, False, part=part))
        else:
            kept.append(Saved(f"{name}: input", residual * n * h, False, part=part))
            kept.append(Saved(f"{name}: mean and 1/std", 8 * n, False, part=part))
        if amp:  # each reader casts the float32 output to 16 bits and keeps its copy
            count = readers if adapted.full else round(adapted.adapters_per_layer.get(readers_role, 0))
            if count:
                kept.append(Saved(f"{name}: 16-bit copies for the projections", count * 2 * n * h, False, part=part))
        elif adapted.keeps_input(readers_role):
            kept.append(Saved(f"{name}: output (projections' input)", a * n * h, False, part=part))
        return kept

    def attention(name: str, kv_tokens: int) -> list[Saved]:
        kv = b * kv_tokens
        if math_path:
            return math_attention(name, kv_tokens)
        kept = [Saved(f"{name}: queries", a * n * q_dim)]
        if not eager:
            return kept + [Saved(f"{name}: keys and values", 2 * a * kv * kv_dim),
                           Saved(f"{name}: output", a * n * q_dim),
                           Saved(f"{name}: log-sum-exp", 4 * b * heads * s)]
        expanded = q_dim if spec.kv_heads < heads else kv_dim  # repeat_kv copies them per head
        scores = b * heads * s * kv_tokens
        kept.append(Saved(f"{name}: keys and values", 2 * a * kv * expanded))
        if rms:  # softmax in float32, then a copy in the compute dtype
            kept.append(Saved(f"{name}: softmax (float32)", 4 * scores, quadratic=True))
            if a != 4:
                kept.append(Saved(f"{name}: softmax copy", a * scores, quadratic=True))
        else:
            kept.append(Saved(f"{name}: softmax", a * scores, quadratic=True))
        if traits.attention_dropout > 0:
            kept += [Saved(f"{name}: dropout mask", mask * scores, quadratic=True),
                     Saved(f"{name}: dropped-out probabilities", a * scores, quadratic=True)]
        if adapted.keeps_input("attn_out"):
            kept.append(Saved(f"{name}: output", a * n * q_dim))
        return kept

    def math_attention(name: str, kv_tokens: int) -> list[Saved]:
        """SDPA's math path keeps the scaled queries and keys, the values, the probabilities,
        the dropout mask (in the probabilities' dtype) and the dropped-out probabilities, all
        in float32 when the inputs are 16-bit (it upcasts them)."""
        kv = b * kv_tokens
        expanded = q_dim if spec.kv_heads < heads else kv_dim
        scores = b * heads * s * kv_tokens
        acc = 4
        kept = [Saved(f"{name}: scaled queries (float32)", acc * n * q_dim),
                Saved(f"{name}: scaled keys and values (float32)", 2 * acc * kv * expanded),
                Saved(f"{name}: softmax (float32)", acc * scores, quadratic=True),
                Saved(f"{name}: dropout mask", acc * scores, quadratic=True),
                Saved(f"{name}: dropped-out probabilities", acc * scores, quadratic=True)]
        if adapted.keeps_input("attn_out"):
            kept.append(Saved(f"{name}: output", a * n * q_dim))
        return kept

    act_keeps = ACTIVATION_KEEPS.get(traits.activation, 1)

    def mlp(width: int, tokens: int, label: str) -> list[Saved]:
        kept = []
        if act_keeps:
            kept.append(Saved(f"{label}: activation input", act_keeps * a * tokens * width, part="mlp"))
        if spec.gated_mlp:
            kept.append(Saved(f"{label}: activation output and up projection", 2 * a * tokens * width, part="mlp"))
            if adapted.keeps_input("mlp_out"):
                kept.append(Saved(f"{label}: product (down projection's input)", a * tokens * width, part="mlp"))
        elif act_keeps == 0 or adapted.keeps_input("mlp_out"):
            kept.append(Saved(f"{label}: activation output", a * tokens * width, part="mlp"))
        if traits.activation_dropout > 0:
            kept.append(Saved(f"{label}: dropout mask", mask * tokens * width, part="mlp"))
        return kept

    k = max(spec.experts_per_token, 1)
    expert_width = spec.expert_intermediate or spec.intermediate

    def feed_forward() -> list[Saved]:
        if not spec.experts:
            return mlp(spec.intermediate, n, "MLP")
        routed = n * k  # each token visits k experts
        kept = [Saved("router: logits and float32 softmax", (a + 4) * n * spec.experts, False, part="mlp"),
                Saved("experts: gathered inputs and outputs", 2 * a * routed * h, part="mlp")]
        kept += mlp(expert_width, routed, "experts")
        if spec.shared_expert_intermediate:
            kept += mlp(spec.shared_expert_intermediate, n, "shared experts")
        return kept

    def dropout(name: str, part: str) -> list[Saved]:
        return [Saved(name, mask * n * h, False, part=part)] if traits.hidden_dropout > 0 else []

    def adapters(part: str) -> list[Saved]:
        if adapted.full:
            return []
        roles = ("mlp_in", "mlp_out", "experts") if part == "mlp" else ("attn_in", "attn_inner", "attn_out", "router")
        routed = k / spec.experts if spec.experts else 1  # an expert's adapter sees its tokens only
        count = sum(v * (routed if role == "experts" else 1)
                    for role, v in adapted.adapters_per_layer.items() if role in roles)
        return [Saved("LoRA: A's outputs", math.ceil(count * a * n * adapted.rank), False, part=part)] if count else []

    block = (norm("attention norm", "attn_in", attn_readers, "attention") + attention("self-attention", s)
             + dropout("attention dropout mask", "attention") + adapters("attention")
             + norm("MLP norm", "mlp_in", mlp_readers, "mlp") + feed_forward() + dropout("MLP dropout mask", "mlp")
             + adapters("mlp"))
    layers = _layer_count(spec)
    if spec.kind == "encoder-decoder" and spec.layers:
        # decoder layers add cross-attention over the encoder's output; spread over all layers
        cross = norm("cross-attention norm", "attn_in", 1, "attention") + attention("cross-attention", s)
        block = block + [replace(c, bytes=c.bytes * spec.layers // layers) for c in cross]
    block = tuple(_split(x, tensor, sequence_parallel) for x in block)

    embedding = []
    if adapted.full:
        embedding.append(Saved("token ids", 8 * n, False))
    if traits.embedding_dropout > 0:
        # on the CPU the mask has the embeddings' dtype: float32 under autocast
        embedding.append(Saved("embedding dropout mask", (1 if setup.device == "cuda" else residual) * n * h, False))
    head = norm("final norm", "head", 1, "head")
    vocab = spec.vocab if spec.kind != "vision" else 0
    logits_gradient = 0
    if vocab:
        loss = math.ceil(4 * n * vocab / tensor)  # vocabulary-parallel loss with tensor parallelism
        logits_gradient = 2 * loss  # the loss's gradient, then the log-softmax's
        head.append(Saved("loss: float32 log-probabilities", loss, False))
        head.append(Saved("labels", 8 * n, False))
    head = tuple(_split(x, tensor, sequence_parallel) for x in head)

    # Two moments of a layer's backward. In the MLP half (first): the gradients of the down
    # projection's input, of the activation and of the up projection, once the down
    # projection's input is released. In the attention half: the gradients of the scores
    # (eager) or of queries, keys, values and output (SDPA), once the MLP half is released.
    full = adapted.full
    mlp_items = sum(x.bytes for x in block if x.part == "mlp")
    tokens, width = (math.ceil(n * k / spec.experts), expert_width) if spec.experts else (n, spec.intermediate)
    if spec.gated_mlp:
        mlp_flow = 3 * a * tokens * width
        mlp_released = a * tokens * width if adapted.keeps_input("mlp_out") else 0
    else:
        mlp_flow = (3 if act_keeps > 1 else 2) * a * tokens * width
        mlp_released = a * tokens * width if adapted.keeps_input("mlp_out") and act_keeps else 0
    if eager:
        scores = b * heads * s * s
        grad_values = a * n * (q_dim if spec.kv_heads < heads else kv_dim)
        if math_path:  # everything in float32: the probabilities' gradients, the values'
            attn_flow, copy = 8 * scores + 4 * n * (q_dim if spec.kv_heads < heads else kv_dim), 0
        elif rms:  # the scores' gradient in the compute dtype, its float32 copy, the softmax's gradient
            attn_flow, copy = 8 * scores + grad_values, (a * scores if a != 4 else 0)
        else:
            attn_flow, copy = 2 * a * scores + grad_values, 0
        if traits.attention_dropout > 0:
            copy += (4 if math_path else a) * scores
        attn_released = copy + (a * n * q_dim if adapted.keeps_input("attn_out") else 0)
    else:
        attn_flow, attn_released = a * n * (2 * q_dim + 2 * kv_dim), 0
    weights_mlp = _role_parameters(summary, spec, ("mlp_out",)) if full else 0
    weights_all_mlp = _role_parameters(summary, spec, ("mlp_in", "mlp_out", "experts", "router")) if full else 0
    weights_attn = _role_parameters(summary, spec, ("mlp_in", "mlp_out", "experts", "router", "attn_out")) if full else 0
    weights_layer = _role_parameters(summary, spec, ("mlp_in", "mlp_out", "experts", "router", "attn_out", "attn_in",
                                                     "attn_inner")) if full else 0
    # A norm's backward: Llama-style norms work in float32 (five n x h float32 intermediate
    # gradients at once), nn.LayerNorm's kernel produces its input's gradient.
    norm_flow = _shard((20 if rms else 2 * a) * n * h, tensor, sequence_parallel)
    mlp_norm = sum(x.bytes for x in block if x.part == "mlp" and "norm" in x.name)
    attn_items = sum(x.bytes for x in block if x.part == "attention")
    attn_norm = sum(x.bytes for x in block if x.part == "attention" and "norm" in x.name and "cross" not in x.name)
    moments = (
        Moment("mlp", math.ceil(mlp_released / tensor), math.ceil(mlp_flow / tensor), math.ceil(weights_mlp / tensor)),
        Moment("mlp norm", mlp_items - mlp_norm, norm_flow, math.ceil(weights_all_mlp / tensor)),
        Moment("attention", math.ceil(mlp_items + attn_released / tensor), math.ceil(attn_flow / tensor),
               math.ceil(weights_attn / tensor)),
        Moment("attention norm", mlp_items + attn_items - attn_norm, norm_flow, math.ceil(weights_layer / tensor)),
    )

    # With LoRA the embeddings are frozen: the first layer's input needs no gradient, so its
    # first norm keeps nothing, nor does its attention if no adapter sits there.
    saving = 0
    if not full and setup.checkpointing != "full":
        first_norm = [x for x in block if x.name.startswith("attention norm") and "output" not in x.name
                      and "copies" not in x.name]
        saving = sum(x.bytes for x in first_norm)
        if not any(adapted.keeps_input(role) for role in ("attn_in", "attn_out", "attn_inner")):
            saving = sum(x.bytes for x in block if x.part == "attention")

    copies = head_copy = 0
    if amp:  # autocast keeps a 16-bit copy of every weight a product used, until its backward
        matrices = sum(m.parameters for m in summary.linears if m.kind in ("linear", "experts"))
        copies = math.ceil(2 * matrices / layers / tensor)
        head_copy = math.ceil(2 * sum(m.parameters for m in summary.linears if m.kind in ("head", "tied-head")) / tensor)
    return ActivationModel(
        layer=block, embedding=tuple(embedding), head=head, moments=moments, norm_flow=norm_flow,
        logits_gradient=logits_gradient,
        residual_gradient=_shard(residual * n * h, tensor, sequence_parallel),
        layer_input=_shard(residual * n * h, tensor, sequence_parallel),
        weight_copies_per_layer=copies, head_weight_copy=head_copy, first_layer_saving=saving)


def _shard(size: int, tensor: int, sequence_parallel: bool) -> int:
    return math.ceil(size / tensor) if sequence_parallel else size


def _split(item: Saved, tensor: int, sequence_parallel: bool) -> Saved:
    if tensor == 1:
        return item
    divide = item.tensor_parallel or sequence_parallel
    return replace(item, bytes=math.ceil(item.bytes / tensor) if divide else item.bytes)


def layer_activation_bytes(summary: ModelSummary, spec: ArchSpec, traits: ModelTraits, setup: TrainingSetup,
                           tensor: int = 1, sequence_parallel: bool = True) -> int:
    """Bytes one transformer layer keeps for its backward pass (per micro-batch)."""
    model = activation_model(summary, spec, traits, setup, tensor, sequence_parallel)
    return model.layer_bytes(setup.checkpointing)


# Model states per GPU ----------------------------------------------------------------------

@dataclass(frozen=True)
class _Stage:
    """One pipeline stage's share of the model: its layers and the parts around them."""

    index: int
    layers: int
    parameters: int  # before tensor parallelism
    front: bool
    back: bool


def _stages(summary: ModelSummary, spec: ArchSpec, pipeline: int) -> list[_Stage]:
    layer_units = [u for u in summary.units if u.name.split(".")[-1].isdigit()]
    total_layers = len(layer_units) or _layer_count(spec)
    layer_params = sum(u.parameters for u in layer_units) if layer_units else summary.parameters
    outside = summary.parameters - layer_params
    first = next((i for i, u in enumerate(summary.units) if u.name.split(".")[-1].isdigit()), 0)
    front = sum(u.parameters for u in summary.units[:first] if not u.name.split(".")[-1].isdigit())
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
    return stages


def _tensor_share(summary: ModelSummary, parameters: int, tensor: int) -> int:
    """Parameters one GPU of a tensor-parallel group holds: matrices, embeddings and biases
    split t ways, norms replicated."""
    if tensor == 1:
        return parameters
    replicated = (summary.groups.get("norm", 0) + summary.groups.get("other", 0)) / max(summary.parameters, 1)
    return math.ceil(parameters * replicated + parameters * (1 - replicated) / tensor)


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
    peak_moment: str  # loss (start of the backward), last layer, first layer, optimizer step
    forward_backward_bytes: int
    optimizer_step_bytes: int
    cpu_bytes: int  # offloaded to the host, this GPU's share
    at_peak: dict
    parameters: int
    trainable_parameters: int
    gpus: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    zero_stage: int
    pipeline_stage: int

    @property
    def model_state_bytes(self) -> int:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    def to_json(self) -> dict:
        return asdict(self)


def model_traits_default(summary: ModelSummary) -> ModelTraits:
    return traits_from_config(None, summary.model_type)


def training_memory(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup = TrainingSetup(),
                    layout: Layout = Layout(), traits: ModelTraits | None = None) -> TrainingMemory:
    """Peak memory of one training step in its steady state (optimizer states exist), per
    GPU, and what each component takes."""
    check_setup(setup)
    check_layout(layout, spec)
    traits = traits or model_traits_default(summary)
    results = [_stage_memory(summary, spec, setup, layout, traits, stage)
               for stage in _distinct_stages(_stages(summary, spec, layout.pipeline))]
    return max(results, key=lambda r: r.total_bytes)


def _distinct_stages(stages: list[_Stage]) -> list[_Stage]:
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
    if setup.method == "full":
        tensors, trainable_total, trainable, base = full_tensors(summary, spec), summary.parameters, held, 0
    else:
        tensors = lora_tensors(summary, setup.lora_rank, setup.lora_targets)
        trainable_total = sum(x.parameters for x in tensors)
        trainable = math.ceil(trainable_total * share)
        base = held * p.weight if setup.method == "lora" else \
            math.ceil(quantized_base_bytes(summary, p.weight, setup.double_quant) * share)

    def shard(size: int, from_stage: int) -> int:
        return math.ceil(size / d) if layout.zero >= from_stage else size

    working, master = trainable * p.weight, trainable * p.master
    states = math.ceil(optimizer_state_bytes(tensors, setup.optimizer, p.state) * trainable / max(trainable_total, 1))
    grads16 = trainable * p.grad
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
    if stage.back:  # once the loss and the head have released theirs
        after_head = activations - model.loss_saved - model.labels_saved - model.head_weight_copy
        moments["final norm"] = (after_head, model.norm_flow, min(head_grads, growing))
    rest_last = activations - (model.head_bytes if stage.back else 0)
    rest_first = others + per_layer + front
    for inner in model.moments:
        in_layer = math.ceil(inner.weight_parameters * per_trainable) if setup.method == "full" else 0
        flow = inner.flow + model.residual_gradient
        moments[f"last layer ({inner.name})"] = (rest_last + recompute - inner.released, flow,
                                                 min(growing, head_grads + in_layer))
        moments[f"first layer ({inner.name})"] = (rest_first + recompute - inner.released, flow,
                                                  min(growing, math.ceil(growing - front_grads - layer_grads) + in_layer))
    return activations, moments


def _accumulates(setup: TrainingSetup, layout: Layout) -> bool:
    """Gradients live across micro-batches: accumulation, and every pipeline."""
    return setup.gradient_accumulation > 1 or layout.pipeline > 1


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
                         * states.trainable / max(states.trainable_total, 1))
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
        forward_backward_bytes=forward_backward, optimizer_step_bytes=step, cpu_bytes=states.cpu, at_peak=at_peak,
        parameters=summary.parameters, trainable_parameters=states.trainable_total, gpus=layout.gpus,
        data_parallel=layout.data, tensor_parallel=layout.tensor, pipeline_parallel=layout.pipeline,
        zero_stage=layout.zero, pipeline_stage=stage.index)


def _head_trainable(summary: ModelSummary, setup: TrainingSetup, tensor: int) -> int:
    """Trainable parameters of the output head (and final norm): their gradients come first."""
    if setup.method == "full":
        return math.ceil(sum(m.parameters for m in summary.linears if m.kind in ("head", "tied-head")) / tensor)
    adapted = [m for m in lora_modules(summary, setup.lora_targets) if m.kind in ("head", "tied-head")]
    return math.ceil(sum(m.count * lora_rank_of(m, setup.lora_rank) * (m.in_features + m.out_features)
                         for m in adapted) / tensor)


def _front_trainable(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup, tensor: int) -> int:
    """Trainable parameters before the first layer (embeddings): their gradients come last.
    A tied head's are already counted with the head."""
    if setup.method != "full" or any(m.kind == "tied-head" for m in summary.linears):
        return 0
    return math.ceil(summary.groups.get("embedding", 0) / tensor)


# The inverse questions ---------------------------------------------------------------------

def largest_micro_batch(summary: ModelSummary, spec: ArchSpec, capacity: int, setup: TrainingSetup = TrainingSetup(),
                        layout: Layout = Layout(), traits: ModelTraits | None = None, high: int = 4096) -> int:
    """The largest micro-batch whose peak fits in `capacity` bytes per GPU (0: not even one)."""
    check_setup(setup)
    return largest_fitting(capacity, lambda batch: training_memory(
        summary, spec, replace(setup, micro_batch=batch), layout, traits).total_bytes, high)


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


def fewest_gpus(summary: ModelSummary, spec: ArchSpec, capacity: int, strategy: str,
                setup: TrainingSetup = TrainingSetup(), traits: ModelTraits | None = None,
                limit: int = 4096) -> GpuCount:
    """The fewest GPUs of `capacity` bytes each on which `strategy` fits the training step.
    More GPUs never add memory per GPU within a strategy, so a binary search over the
    candidate counts finds the first that fits."""
    check_setup(setup)
    counts = [n for n in candidate_gpu_counts(limit) if strategy_layout(strategy, n, spec) is not None]
    if strategy == "ddp":
        counts = counts[:1]  # every GPU holds everything: more GPUs never help memory

    def memory(n: int) -> TrainingMemory:
        return training_memory(summary, spec, setup, strategy_layout(strategy, n, spec), traits)

    found = first_where(counts, memory, lambda result: result.total_bytes <= capacity)
    tried = counts[-1] if counts else 0
    if found is None:
        return GpuCount(strategy, 0, None, tried)
    return GpuCount(strategy, found[0], found[1], tried)


def rule_of_thumb_bytes(parameters: int) -> int:
    """The conservative rule for full fine-tuning in bfloat16: a model of X billion
    parameters takes 2X GB to load, and training needs four times that (weights, gradients
    and two Adam states, all in 16 bits): 8X GB, i.e. 8 bytes per parameter."""
    return 8 * parameters
