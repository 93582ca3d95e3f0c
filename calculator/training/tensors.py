"""Trainable tensors and the optimizer: every parameter of full fine-tuning, LoRA's adapters,
what each weight matrix does, and the optimizer states and temporaries they need."""

from __future__ import annotations

from dataclasses import dataclass
import math
import re

from calculator.models.architecture import ArchSpec
from calculator.core.errors import CalculatorError
from calculator.models.summary import Linear, ModelSummary
from calculator.training.setup import ALL_LINEAR, OPTIMIZERS, TrainingSetup, _choice

# bitsandbytes: 8-bit optimizer states in blocks of 256 values with a float32 scale each;
# tensors under 4,096 values keep float32 states (min_8bit_size).
BNB_BLOCK = 256
BNB_MIN_8BIT = 4096
BNB_QMAPS_BYTES = 2 * 256 * 4  # the two quantization maps, shared by every tensor

# Matrices a module holds as a bare parameter, not an nn.Linear, which peft's "all-linear"
# cannot wrap: Gemma 3's multi_modal_projector.mm_input_projection_weight (checked with peft 0.21).
BARE_MATRICES = ("multi_modal_projector",)

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
        chosen = tuple(m for m in summary.linears if m.kind in ("linear", "experts") and m.name not in BARE_MATRICES)
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


def adapter_parameters(module: Linear, rank: int) -> int:
    """LoRA adds A (rank x in) and B (out x rank) to each adapted matrix (Hu et al., 2021)."""
    return module.count * lora_rank_of(module, rank) * (module.in_features + module.out_features)


def lora_parameters(summary: ModelSummary, rank: int, targets: str = ALL_LINEAR) -> int:
    """Every adapter's parameters, as peft counts them trainable."""
    return sum(adapter_parameters(m, rank) for m in lora_modules(summary, targets))


def runs_on_text(module: Linear, spec: ArchSpec) -> bool:
    """Whether a text batch runs this matrix: not when it sits in a vision-language model's
    image side. peft adapts the tower's matching layers too ("all-linear", or a name such as
    q_proj that the tower shares), but their adapters get no gradient and AdamW no state for
    them (.grad stays None; checked with peft 0.21 on a real Gemma 3 on the CPU)."""
    return not (module.tower and spec.kind != "vision")


def idle_adapter_parameters(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup) -> int:
    """LoRA parameters peft puts on a vision-language model's image side (`runs_on_text`): a
    text batch never reaches them, so they hold weights but no gradients and no optimizer
    states. 0 without adapters (full fine-tuning)."""
    if setup.method == "full":
        return 0
    return sum(adapter_parameters(m, setup.lora_rank) for m in lora_modules(summary, setup.lora_targets)
               if not runs_on_text(m, spec))


def lora_tensors(summary: ModelSummary, rank: int, targets: str, spec: ArchSpec) -> tuple[TensorGroup, ...]:
    """The A and B matrices of the adapters a text batch trains (`runs_on_text`)."""
    groups = []
    for m in lora_modules(summary, targets):
        if not runs_on_text(m, spec):
            continue
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
