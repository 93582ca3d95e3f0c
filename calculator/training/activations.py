"""Activations: the tensors a micro-batch keeps for the backward pass, tensor by tensor."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
import math

from ..architecture import ArchSpec
from ..families import ModelTraits
from ..summary import ModelSummary
from .setup import PRECISION_BYTES, TrainingSetup, _layer_count
from .tensors import linear_role, lora_modules

# Tensors of n x intermediate that an activation function keeps for its backward, besides its
# output: SiLU and GELU keep their input; ReLU keeps only its output; the tanh GELU written
# in Python (gelu_new, GPT-2's) keeps its input and three intermediate results.
ACTIVATION_KEEPS = {"silu": 1, "swish": 1, "gelu": 1, "gelu_pytorch_tanh": 1, "gelu_python": 1, "relu": 0,
                    "gelu_new": 4, "gelu_fast": 4, "quick_gelu": 2, "gelu_accurate": 4, "tanh": 0, "sigmoid": 0}


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
