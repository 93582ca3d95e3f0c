"""The tensors one transformer layer keeps for its backward pass, block by block (norm,
attention, MLP, dropout, LoRA adapters), as transformers' implementations keep them.

Every builder reads the same few sizes, gathered once per setup in `_Dims`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math

from calculator.models.architecture import ArchSpec, attention_run
from calculator.models.families import ModelTraits
from calculator.models.summary import ModelSummary
from calculator.training.setup import AUTOCAST_PRECISIONS, PRECISION_BYTES, TrainingSetup, _layer_count, adapters_in_float32, float32_residual
from calculator.training.tensors import linear_role, lora_modules, runs_on_text

# Tensors of n x intermediate that an activation function keeps for its backward, besides its
# output: SiLU and GELU keep their input; ReLU keeps only its output; the tanh GELU written
# in Python (gelu_new, GPT-2's) keeps its input and three intermediate results.
ACTIVATION_KEEPS = {"silu": 1, "swish": 1, "gelu": 1, "gelu_pytorch_tanh": 1, "gelu_python": 1, "relu": 0,
                    "gelu_new": 4, "gelu_fast": 4, "quick_gelu": 2, "gelu_accurate": 4, "tanh": 0, "sigmoid": 0}


# What a kept tensor is. Every sum over kept tensors reads these, never a tensor's label.
ROLES = (
    "norm",  # a norm's own statistics: its input (float32 for RMSNorm), 1/rms or mean and 1/std, normalised values
    "norm_output",  # a norm's output as the projections read it (autocast: one 16-bit copy per reader)
    "attention",  # queries, keys, values, output, log-sum-exp
    "scores",  # score matrices (sequence x sequence): dropped by selective recomputation
    "mlp",  # the MLP's and the experts' tensors, the router's
    "dropout",  # a dropout mask on hidden states or on the MLP's activations
    "lora",  # LoRA's A outputs
    "token_ids",  # what the embedding's gradient needs
    "loss",  # the loss's float32 log-probabilities
    "labels",
)
NORM_ROLES = ("norm", "norm_output")  # a norm's tensors, its output included
# Where it sits: a block of the layer (its norm included), or before or after the layers.
SITES = ("attention", "cross-attention", "mlp", "embedding", "head")
# The groups the guide's table of one layer sums up (norm: the norms' outputs too).
LAYER_GROUPS = ("norm", "attention", "scores", "mlp", "dropout", "lora")


@dataclass(frozen=True)
class Saved:
    """One kind of tensor kept for the backward pass, in bytes per layer or per model part."""

    name: str  # for people: no sum reads it
    bytes: int
    role: str  # one of ROLES
    site: str  # one of SITES
    tensor_parallel: bool = True  # split by tensor parallelism (else only by sequence parallelism)

    @property
    def quadratic(self) -> bool:
        """Grows with sequence^2: dropped by selective recomputation."""
        return self.role == "scores"

    @property
    def part(self) -> str:
        """The half of the layer it belongs to (attention or mlp), or embedding or head."""
        return "attention" if self.site == "cross-attention" else self.site

    @property
    def group(self) -> str:
        """norm, attention, scores, mlp, dropout or lora for a layer's tensors (LAYER_GROUPS):
        what the guide's tables sum up; token_ids, loss or labels outside the layers."""
        return "norm" if self.role == "norm_output" else self.role


@dataclass(frozen=True)
class _Dims:
    """The sizes of one micro-batch every kept tensor is built from, and which code runs."""

    batch: int
    sequence: int
    tokens: int  # batch x sequence
    hidden: int
    heads: int
    q_dim: int  # queries per token: heads x head_dim (latent attention: the expanded width)
    kv_dim: int  # keys (or values) per token
    repeated_kv_dim: int  # keys (or values) per token once repeat_kv copies them per head
    act_bytes: int  # what the matrix products produce
    residual_bytes: int  # the residual stream
    mask_bytes: int  # one element of a dropout mask
    normalised_bytes: int  # a Llama-style norm's normalised values
    autocast: bool  # a float32 residual stream with 16-bit products under torch.autocast (amp, prepared QLoRA)
    rms_norm: bool  # Llama-style RMSNorm (else nn.LayerNorm)
    eager: bool  # the score matrices are built: eager attention, or SDPA's math path
    math_path: bool  # SDPA's math path, in float32
    activation_keeps: int  # ACTIVATION_KEEPS of the model's activation function
    experts_per_token: int  # 1 without experts
    expert_width: int
    adapter_input_bytes: int = 0  # float32 adapters on a 16-bit model: each keeps its input cast (4, or 2 under autocast)
    adapter_output_bytes: int = 0  # and its A output in that dtype (0: the products' own)
    softmax_float32: bool = False  # CUDA autocast runs softmax in float32 (its float32 op list)

    @property
    def hidden_states(self) -> int:
        """Elements of one tokens x hidden tensor."""
        return self.tokens * self.hidden

    def scores(self, kv_tokens: int) -> int:
        """Elements of the score matrices: batch x heads x sequence x kv_tokens."""
        return self.batch * self.heads * self.sequence * kv_tokens


def _dims(spec: ArchSpec, traits: ModelTraits, setup: TrainingSetup) -> _Dims:
    precision = PRECISION_BYTES[setup.precision]
    autocast = float32_residual(setup)
    act_bytes = precision.act
    # peft casts a layer's input to its float32 adapters' dtype; under autocast the product
    # casts it back to 16 bits and keeps that copy, without autocast it keeps the float32 one
    under_autocast = autocast or setup.precision in AUTOCAST_PRECISIONS
    adapter_bytes = (2 if under_autocast else 4) if adapters_in_float32(setup) else 0
    heads = max(spec.heads, 1)
    head_dim = spec.head_dim or spec.hidden // heads
    q_dim = heads * head_dim
    kv_dim = spec.kv_heads * head_dim
    if spec.mla_expanded_dim:  # latent attention: keys and values rebuilt per head
        q_dim = kv_dim = spec.mla_expanded_dim // 3
    # With attention dropout the CPU has no fused SDPA kernel: PyTorch's math path runs, in
    # float32 for 16-bit inputs (torch's _scaled_dot_product_attention_math).
    # The attention transformers really runs: models without SDPA support (Gemma 2's softcapped
    # scores) fall back to eager, as the inference model already assumes.
    attention = attention_run(spec, setup.attention)
    math_path = attention == "sdpa" and setup.device == "cpu" and traits.attention_dropout > 0
    return _Dims(
        batch=setup.micro_batch, sequence=setup.sequence, tokens=setup.micro_batch * setup.sequence,
        hidden=spec.hidden, heads=heads, q_dim=q_dim, kv_dim=kv_dim,
        repeated_kv_dim=q_dim if spec.kv_heads < heads else kv_dim,  # repeat_kv copies them per head
        act_bytes=act_bytes,
        residual_bytes=4 if autocast else act_bytes,  # autocast leaves the residual stream in float32
        mask_bytes=1 if setup.device == "cuda" else act_bytes,  # CUDA keeps a bool mask; the CPU a scaled copy
        normalised_bytes=4 if (traits.norm == "gemma" or autocast) else act_bytes,
        autocast=autocast, rms_norm=traits.norm in ("rms", "gemma"),
        eager=attention == "eager" or math_path, math_path=math_path,
        activation_keeps=ACTIVATION_KEEPS.get(traits.activation, 1),
        experts_per_token=max(spec.experts_per_token, 1),
        expert_width=spec.expert_intermediate or spec.intermediate,
        adapter_input_bytes=adapter_bytes, adapter_output_bytes=adapter_bytes,
        softmax_float32=under_autocast and setup.device == "cuda")


@dataclass(frozen=True)
class _Adapted:
    """Which matrices are trained (full fine-tuning) or carry a LoRA adapter."""

    full: bool
    roles: frozenset = frozenset()
    rank: int = 0
    adapters_per_layer: dict = field(default_factory=dict)  # role -> adapted matrices per layer
    inputs_per_layer: dict = field(default_factory=dict)  # role -> input features of those matrices, per layer
    own_inputs: bool = False  # float32 adapters keep their own cast copy: the model's own input is not needed

    def adapts(self, role: str) -> bool:
        return self.full or role in self.roles

    def keeps_input(self, role: str) -> bool:
        """Whether the matrices of this role need the layer's own (model-dtype) input for their
        gradients: trained weights do, adapters in the model's dtype do; float32 adapters
        keep the copy they cast instead."""
        return self.full or (role in self.roles and not self.own_inputs)


def _adapted(summary: ModelSummary, spec: ArchSpec, setup: TrainingSetup) -> _Adapted:
    if setup.method == "full":
        return _Adapted(full=True)
    layers = _layer_count(spec)
    per_layer: dict[str, float] = {}
    inputs: dict[str, float] = {}
    for m in lora_modules(summary, setup.lora_targets):
        if not runs_on_text(m, spec):  # a tower's adapters keep nothing: a text batch never runs them
            continue
        role = linear_role(m, spec)
        share = m.count / (1 if role == "head" else layers)
        per_layer[role] = per_layer.get(role, 0) + share
        inputs[role] = inputs.get(role, 0) + share * m.in_features
    return _Adapted(full=False, roles=frozenset(per_layer), rank=setup.lora_rank, adapters_per_layer=per_layer,
                    inputs_per_layer=inputs, own_inputs=adapters_in_float32(setup))


def _norm_tensors(dims: _Dims, adapted: _Adapted, name: str, site: str, readers_role: str,
                  readers: int) -> list[Saved]:
    """A norm, and the copies of its output that the matrices reading it keep."""
    kept: list[Saved] = []

    def norm(label: str, size: int, role: str = "norm") -> None:
        kept.append(Saved(f"{name}: {label}", size, role, site, tensor_parallel=False))

    if dims.rms_norm:
        norm("float32 input", 4 * dims.hidden_states)
        norm("1/rms", 4 * dims.tokens)
        if adapted.full:  # the weight's gradient needs the normalised values
            norm("normalised", dims.normalised_bytes * dims.hidden_states)
    else:
        norm("input", dims.residual_bytes * dims.hidden_states)
        norm("mean and 1/std", 8 * dims.tokens)
    if dims.autocast:  # each reader casts the float32 output to 16 bits and keeps its copy
        count = readers if adapted.full else round(adapted.adapters_per_layer.get(readers_role, 0))
        if count:
            norm("16-bit copies for the projections", count * 2 * dims.hidden_states, "norm_output")
    elif adapted.keeps_input(readers_role):
        norm("output (projections' input)", dims.act_bytes * dims.hidden_states, "norm_output")
    return kept


def _attention_tensors(dims: _Dims, traits: ModelTraits, adapted: _Adapted, name: str, site: str,
                       kv_tokens: int) -> list[Saved]:
    """Self- or cross-attention over `kv_tokens` keys: SDPA's flash or memory-efficient
    kernels keep queries, keys, values, output and the log-sum-exp; eager attention the
    score matrices too."""
    if dims.math_path:
        return _math_attention_tensors(dims, adapted, name, site, kv_tokens)
    act = dims.act_bytes
    kv_elements = dims.batch * kv_tokens

    def saved(label: str, size: int, role: str = "attention") -> Saved:
        return Saved(f"{name}: {label}", size, role, site)

    kept = [saved("queries", act * dims.tokens * dims.q_dim)]
    if not dims.eager:
        return kept + [saved("keys and values", 2 * act * kv_elements * dims.kv_dim),
                       saved("output", act * dims.tokens * dims.q_dim),
                       saved("log-sum-exp", 4 * dims.batch * dims.heads * dims.sequence)]
    scores = dims.scores(kv_tokens)
    kept.append(saved("keys and values", 2 * act * kv_elements * dims.repeated_kv_dim))
    if dims.rms_norm:  # softmax in float32, then a copy in the compute dtype
        kept.append(saved("softmax (float32)", 4 * scores, "scores"))
        if act != 4:
            kept.append(saved("softmax copy", act * scores, "scores"))
    elif dims.softmax_float32 and act != 4:
        # CUDA autocast runs softmax in float32 (its float32 op list); the product with the
        # values casts the (dropped-out) probabilities back to 16 bits and keeps that copy
        kept.append(saved("softmax (float32, autocast)", 4 * scores, "scores"))
        if traits.attention_dropout > 0:
            kept.append(saved("dropout mask", dims.mask_bytes * scores, "scores"))
        kept.append(saved("16-bit copy of the probabilities", act * scores, "scores"))
        return kept + ([saved("output", act * dims.tokens * dims.q_dim)] if adapted.keeps_input("attn_out") else [])
    else:
        kept.append(saved("softmax", act * scores, "scores"))
    if traits.attention_dropout > 0:
        kept += [saved("dropout mask", dims.mask_bytes * scores, "scores"),
                 saved("dropped-out probabilities", act * scores, "scores")]
    if adapted.keeps_input("attn_out"):
        kept.append(saved("output", act * dims.tokens * dims.q_dim))
    return kept


def _math_attention_tensors(dims: _Dims, adapted: _Adapted, name: str, site: str, kv_tokens: int) -> list[Saved]:
    """SDPA's math path keeps the scaled queries and keys, the values, the probabilities,
    the dropout mask (in the probabilities' dtype) and the dropped-out probabilities, all
    in float32 when the inputs are 16-bit (it upcasts them)."""
    kv_elements = dims.batch * kv_tokens
    scores = dims.scores(kv_tokens)
    accumulate = 4

    def saved(label: str, size: int, role: str = "attention") -> Saved:
        return Saved(f"{name}: {label}", size, role, site)

    kept = [saved("scaled queries (float32)", accumulate * dims.tokens * dims.q_dim),
            saved("scaled keys and values (float32)", 2 * accumulate * kv_elements * dims.repeated_kv_dim),
            saved("softmax (float32)", accumulate * scores, "scores"),
            saved("dropout mask", accumulate * scores, "scores"),
            saved("dropped-out probabilities", accumulate * scores, "scores")]
    if adapted.keeps_input("attn_out"):
        kept.append(saved("output", dims.act_bytes * dims.tokens * dims.q_dim))
    return kept


def _mlp_tensors(dims: _Dims, spec: ArchSpec, traits: ModelTraits, adapted: _Adapted, width: int, tokens: int,
                 label: str) -> list[Saved]:
    """One MLP of `width` over `tokens` tokens: the activation's input (and what the
    activation function keeps), the gate's product, the dropout mask."""
    act = dims.act_bytes
    kept = []
    if dims.activation_keeps:
        kept.append(Saved(f"{label}: activation input", dims.activation_keeps * act * tokens * width, "mlp", "mlp"))
    if spec.gated_mlp:
        kept.append(Saved(f"{label}: activation output and up projection", 2 * act * tokens * width, "mlp", "mlp"))
        if adapted.keeps_input("mlp_out"):
            kept.append(Saved(f"{label}: product (down projection's input)", act * tokens * width, "mlp", "mlp"))
    elif dims.activation_keeps == 0 or adapted.keeps_input("mlp_out"):
        kept.append(Saved(f"{label}: activation output", act * tokens * width, "mlp", "mlp"))
    if traits.activation_dropout > 0:
        kept.append(Saved(f"{label}: dropout mask", dims.mask_bytes * tokens * width, "dropout", "mlp"))
    return kept


def _feed_forward_tensors(dims: _Dims, spec: ArchSpec, traits: ModelTraits, adapted: _Adapted) -> list[Saved]:
    """The MLP, or the router, the routed experts and the shared experts of a mixture."""
    if not spec.experts:
        return _mlp_tensors(dims, spec, traits, adapted, spec.intermediate, dims.tokens, "MLP")
    routed = dims.tokens * dims.experts_per_token  # each token visits k experts
    kept = [Saved("router: logits and float32 softmax", (dims.act_bytes + 4) * dims.tokens * spec.experts,
                  "mlp", "mlp", tensor_parallel=False),
            Saved("experts: gathered inputs and outputs", 2 * dims.act_bytes * routed * dims.hidden, "mlp", "mlp")]
    kept += _mlp_tensors(dims, spec, traits, adapted, dims.expert_width, routed, "experts")
    if spec.shared_expert_intermediate:
        kept += _mlp_tensors(dims, spec, traits, adapted, spec.shared_expert_intermediate, dims.tokens,
                             "shared experts")
    return kept


def _dropout_tensors(dims: _Dims, traits: ModelTraits, name: str, site: str) -> list[Saved]:
    """The mask of the dropout on a block's output, before the residual sum."""
    if traits.hidden_dropout <= 0:
        return []
    return [Saved(name, dims.mask_bytes * dims.hidden_states, "dropout", site, tensor_parallel=False)]


def _adapter_tensors(dims: _Dims, spec: ArchSpec, adapted: _Adapted, site: str) -> list[Saved]:
    """LoRA's A outputs (rank values per token), for the adapters of one half of the layer
    (site attention or mlp)."""
    if adapted.full:
        return []
    roles = ("mlp_in", "mlp_out", "experts") if site == "mlp" else ("attn_in", "attn_inner", "attn_out", "router")
    routed = dims.experts_per_token / spec.experts if spec.experts else 1  # an expert's adapter sees its tokens only
    count = sum(v * (routed if role == "experts" else 1)
                for role, v in adapted.adapters_per_layer.items() if role in roles)
    if not count:
        return []
    out_bytes = dims.adapter_output_bytes or dims.act_bytes
    kept = [Saved("LoRA: A's outputs", math.ceil(count * out_bytes * dims.tokens * adapted.rank), "lora", site,
                  tensor_parallel=False)]
    if dims.adapter_input_bytes:  # each adapter's own copy of its input, in its dtype
        inputs = sum(v * (routed if role == "experts" else 1)
                     for role, v in adapted.inputs_per_layer.items() if role in roles)
        kept.append(Saved("LoRA: inputs cast for the float32 adapters",
                          math.ceil(dims.adapter_input_bytes * dims.tokens * inputs), "lora", site,
                          tensor_parallel=False))
    return kept
