"""Activations: what a micro-batch keeps for the backward pass, tensor by tensor (the
tensors themselves are built block by block in layer_tensors), and the moments of a layer's
backward pass where gradients flow while activations are released."""

from __future__ import annotations

from dataclasses import dataclass, replace
import math

from calculator.core.memo import kept_by_inputs
from calculator.models.architecture import ArchSpec
from calculator.models.families import ModelTraits
from calculator.models.summary import ModelSummary
from calculator.training.layer_tensors import (
    LAYER_GROUPS, NORM_ROLES, Saved, _adapted, _Adapted, _adapter_tensors, _attention_tensors, _Dims, _dims,
    _dropout_tensors, _feed_forward_tensors, _norm_tensors,
)
from calculator.training.setup import FUSED_TOKEN_TILE, FUSED_VOCAB_TILE, LOSS_CHUNKS, TrainingSetup, _layer_count
from calculator.training.tensors import linear_role

# Activations -------------------------------------------------------------------------------

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
    loss_forward: int  # what the loss adds beside what it keeps at the end of the forward (chunked: the logits)
    residual_gradient: int  # the residual stream's gradient, alive through every layer
    layer_input: int  # what full checkpointing keeps per layer
    weight_copies_per_layer: int  # autocast's 16-bit copies of the weights (amp only)
    head_weight_copy: int
    first_layer_saving: int = 0  # what the first layer need not keep when nothing before it trains

    @property
    def layer_tensors_bytes(self) -> int:
        """Every tensor one layer keeps without recomputation (autocast's weight copies apart)."""
        return sum(s.bytes for s in self.layer)

    def layer_groups(self) -> dict[str, int]:
        """One layer's tensors summed by group (LAYER_GROUPS, in that order): the guide's table."""
        return {group: sum(s.bytes for s in self.layer if s.group == group) for group in LAYER_GROUPS}

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
        return sum(s.bytes for s in self.head if s.role == "loss")

    @property
    def labels_saved(self) -> int:
        return sum(s.bytes for s in self.head if s.role == "labels")

    @property
    def loss_held(self) -> int:
        """The most the loss holds: what it kept (labels included) and, whichever is larger,
        its backward's gradients or tiles or what its forward adds at its end (setup.loss)."""
        return self.loss_saved + self.labels_saved + max(self.logits_gradient, self.loss_forward)


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


# Kept (~4.9 KB an entry with its key, tracemalloc: ~2.5 MB at most): a training peak asks for it
# once per pipeline stage it weighs, and the fewest-GPU searches ask again for every layout with
# the same tensor split; a fine-tuning case change asks ~580 times for ~210 distinct ones.
@kept_by_inputs(maxsize=512)
def activation_model(summary: ModelSummary, spec: ArchSpec, traits: ModelTraits, setup: TrainingSetup,
                     tensor: int = 1, sequence_parallel: bool = True) -> ActivationModel:
    """The tensors a micro-batch keeps, from transformers' implementations: a Llama-style
    RMSNorm keeps its float32 input and normalised copy, SDPA (flash or memory-efficient
    kernels) keeps queries, keys, values, output and the log-sum-exp, eager attention the
    score matrices, the MLP its projections and activation inputs, dropout its masks; a
    frozen matrix keeps nothing for its own gradient (LoRA). With tensor parallelism the
    attention and MLP tensors split t ways, the rest too with sequence parallelism
    (Korthikanti et al., 2022)."""
    dims = _dims(spec, traits, setup)
    adapted = _adapted(summary, spec, setup)
    attention_readers, mlp_readers = _readers(summary, spec)
    block = (_norm_tensors(dims, adapted, "attention norm", "attention", "attn_in", attention_readers)
             + _attention_tensors(dims, traits, adapted, "self-attention", "attention", dims.sequence)
             + _dropout_tensors(dims, traits, "attention dropout mask", "attention")
             + _adapter_tensors(dims, spec, adapted, "attention")
             + _norm_tensors(dims, adapted, "MLP norm", "mlp", "mlp_in", mlp_readers)
             + _feed_forward_tensors(dims, spec, traits, adapted)
             + _dropout_tensors(dims, traits, "MLP dropout mask", "mlp")
             + _adapter_tensors(dims, spec, adapted, "mlp"))
    layers = _layer_count(spec)
    if spec.kind == "encoder-decoder" and spec.layers:
        # decoder layers add cross-attention over the encoder's output; spread over all layers
        cross = (_norm_tensors(dims, adapted, "cross-attention norm", "cross-attention", "attn_in", 1)
                 + _attention_tensors(dims, traits, adapted, "cross-attention", "cross-attention", dims.sequence))
        block = block + [replace(c, bytes=c.bytes * spec.layers // layers) for c in cross]
    block = tuple(_split(x, tensor, sequence_parallel) for x in block)

    embedding = _embedding_tensors(dims, traits, adapted, setup.device)
    head, logits_gradient, loss_forward = _head_tensors(dims, spec, adapted, tensor, setup.loss)
    head = tuple(_split(x, tensor, sequence_parallel) for x in head)

    moments, norm_flow = _layer_moments(summary, spec, traits, dims, adapted, block, tensor, sequence_parallel)
    copies = head_copy = 0
    if dims.autocast:  # autocast keeps a 16-bit copy of every weight a product used, until its backward
        matrices = sum(m.parameters for m in summary.linears if m.kind in ("linear", "experts"))
        copies = math.ceil(2 * matrices / layers / tensor)
        head_matrix = sum(m.parameters for m in summary.linears if m.kind in ("head", "tied-head"))
        # the fused head casts its weight tile by tile instead (no cached copy)
        head_copy = 0 if setup.loss == "fused" else math.ceil(2 * head_matrix / tensor)
    residual = _shard(dims.residual_bytes * dims.hidden_states, tensor, sequence_parallel)
    return ActivationModel(
        layer=block, embedding=embedding, head=head, moments=moments, norm_flow=norm_flow,
        logits_gradient=logits_gradient, loss_forward=loss_forward, residual_gradient=residual, layer_input=residual,
        weight_copies_per_layer=copies, head_weight_copy=head_copy,
        first_layer_saving=_first_layer_saving(block, adapted, setup.checkpointing))


def _embedding_tensors(dims: _Dims, traits: ModelTraits, adapted: _Adapted, device: str) -> tuple[Saved, ...]:
    """Before the first layer: the token ids the embedding's gradient needs, the dropout mask."""
    embedding = []
    if adapted.full:
        embedding.append(Saved("token ids", 8 * dims.tokens, "token_ids", "embedding", tensor_parallel=False))
    if traits.embedding_dropout > 0:
        # on the CPU the mask has the embeddings' dtype: float32 under autocast
        mask_bytes = 1 if device == "cuda" else dims.residual_bytes
        embedding.append(Saved("embedding dropout mask", mask_bytes * dims.hidden_states, "dropout", "embedding",
                               tensor_parallel=False))
    return tuple(embedding)


def _head_tensors(dims: _Dims, spec: ArchSpec, adapted: _Adapted, tensor: int,
                  loss: str = "full") -> tuple[list[Saved], int, int]:
    """After the last layer: the final norm, what the loss keeps and the labels; and what the
    loss's backward holds at its start, and what its forward adds at its end (`loss`: setup.LOSSES).
    full: float32 log-probabilities of every token kept, then their gradient and the
    log-softmax's (2 x 4 bytes per token and vocabulary entry). chunked (torchtune): the same
    log-probabilities, chunk after chunk, next to the 16-bit logits until the loss is computed,
    and one chunk's gradients at a time in the backward. fused (trl,
    Liger): no logits at all; the head's input kept, and one tile of logits in the products'
    dtype with the float32 gradient of the head's input in the backward."""
    head = _norm_tensors(dims, adapted, "final norm", "head", "head", 1)
    # a classifier's loss is over a few labels per sequence (or token): nothing worth counting
    vocab = spec.vocab if spec.kind != "vision" and spec.head != "classifier" else 0
    if not vocab:
        return head, 0, 0
    labels = Saved("labels", 8 * dims.tokens, "labels", "head", tensor_parallel=False)
    if loss == "fused":
        return _fused_head(dims, head) + [labels], _fused_backward(dims, vocab, adapted), 0
    kept = math.ceil(4 * dims.tokens * vocab / tensor)  # vocabulary-parallel loss with tensor parallelism
    head.append(Saved("loss: float32 log-probabilities", kept, "loss", "head", tensor_parallel=False))
    if loss == "chunked":
        # The recipe drops its 16-bit logits only once the loss is computed: at the end of the
        # forward they sit next to every chunk's log-probabilities and the last chunk's upcast;
        # the backward then holds one chunk's gradients at a time.
        logits = math.ceil(dims.act_bytes * dims.tokens * vocab / tensor)
        return head + [labels], math.ceil(2 * kept / LOSS_CHUNKS), logits + math.ceil(kept / LOSS_CHUNKS)
    return head + [labels], 2 * kept, 0  # the loss's gradient, then the log-softmax's


def _fused_head(dims: _Dims, head: list[Saved]) -> list[Saved]:
    """trl's fused LM head keeps a copy of the head's input (the tokens with a label, in the
    final norm's dtype) and two float32 numbers per token (log-sum-exp, entropy); the head's own
    linear never runs, so nothing keeps a copy of its input for it."""
    kept = [s for s in head if s.role != "norm_output"]
    kept.append(Saved("fused head: its input", dims.residual_bytes * dims.hidden_states, "loss", "head",
                      tensor_parallel=False))
    kept.append(Saved("fused head: log-sum-exp and entropy", 8 * dims.tokens, "loss", "head", tensor_parallel=False))
    return kept


def _fused_backward(dims: _Dims, vocab: int, adapted: _Adapted) -> int:
    """The fused head's backward (trl/kernels/chunked_logprob.py, backward): one tile of
    recomputed logits in the products' dtype, the head input's gradient accumulated in
    float32 (and its cast back), the float32 gradient of the head's weight when it trains."""
    tile_tokens = min(dims.tokens, FUSED_TOKEN_TILE)
    tile = dims.act_bytes * tile_tokens * min(vocab, FUSED_VOCAB_TILE)
    cast_input = dims.act_bytes * tile_tokens * dims.hidden if dims.residual_bytes != dims.act_bytes else 0
    gradient = 4 * dims.hidden_states + (dims.residual_bytes * dims.hidden_states if dims.residual_bytes != 4 else 0)
    weight_gradient = 4 * vocab * dims.hidden if adapted.full else 0
    return tile + cast_input + gradient + weight_gradient


def _mlp_backward(dims: _Dims, spec: ArchSpec, adapted: _Adapted) -> tuple[int, int]:
    """Inside the MLP half's backward: the gradients of the down projection's input, of the
    activation and of the up projection in flight, once the down projection's input is
    released. Returns (in flight, released)."""
    act = dims.act_bytes
    if spec.experts:
        tokens, width = math.ceil(dims.tokens * dims.experts_per_token / spec.experts), dims.expert_width
    else:
        tokens, width = dims.tokens, spec.intermediate
    if spec.gated_mlp:
        flow = 3 * act * tokens * width
        released = act * tokens * width if adapted.keeps_input("mlp_out") else 0
    else:
        flow = (3 if dims.activation_keeps > 1 else 2) * act * tokens * width
        released = act * tokens * width if adapted.keeps_input("mlp_out") and dims.activation_keeps else 0
    return flow, released


def _attention_backward(dims: _Dims, traits: ModelTraits, adapted: _Adapted) -> tuple[int, int]:
    """Inside the attention half's backward: the gradients of the scores (eager) or of
    queries, keys, values and output (SDPA), once the MLP half is released. Returns
    (in flight, released)."""
    act = dims.act_bytes
    if not dims.eager:
        return act * dims.tokens * (2 * dims.q_dim + 2 * dims.kv_dim), 0
    scores = dims.scores(dims.sequence)
    grad_values = act * dims.tokens * dims.repeated_kv_dim
    if dims.math_path:  # everything in float32: the probabilities' gradients, the values'
        flow, copy = 8 * scores + 4 * dims.tokens * dims.repeated_kv_dim, 0
    elif dims.rms_norm:  # the scores' gradient in the compute dtype, its float32 copy, the softmax's gradient
        flow, copy = 8 * scores + grad_values, (act * scores if act != 4 else 0)
    else:
        flow, copy = 2 * act * scores + grad_values, 0
    if traits.attention_dropout > 0:
        copy += (4 if dims.math_path else act) * scores
    return flow, copy + (act * dims.tokens * dims.q_dim if adapted.keeps_input("attn_out") else 0)


def _layer_moments(summary: ModelSummary, spec: ArchSpec, traits: ModelTraits, dims: _Dims, adapted: _Adapted,
                   block: tuple[Saved, ...], tensor: int, sequence_parallel: bool) -> tuple[tuple[Moment, ...], int]:
    """Two moments of a layer's backward, the MLP half (first) and the attention half, each
    inside its own work and inside its norm's; and the gradients a norm's backward holds."""
    mlp_flow, mlp_released = _mlp_backward(dims, spec, adapted)
    attention_flow, attention_released = _attention_backward(dims, traits, adapted)
    full = adapted.full
    weights_mlp = _role_parameters(summary, spec, ("mlp_out",)) if full else 0
    weights_all_mlp = _role_parameters(summary, spec, ("mlp_in", "mlp_out", "experts", "router")) if full else 0
    weights_attention = _role_parameters(summary, spec, ("mlp_in", "mlp_out", "experts", "router", "attn_out")) \
        if full else 0
    weights_layer = _role_parameters(summary, spec, ("mlp_in", "mlp_out", "experts", "router", "attn_out", "attn_in",
                                                     "attn_inner")) if full else 0
    # A norm's backward: Llama-style norms work in float32 (five n x h float32 intermediate
    # gradients at once), nn.LayerNorm's kernel produces its input's gradient.
    norm_flow = _shard((20 if dims.rms_norm else 2 * dims.act_bytes) * dims.hidden_states, tensor, sequence_parallel)
    mlp_items = sum(x.bytes for x in block if x.part == "mlp")
    mlp_norm = sum(x.bytes for x in block if x.part == "mlp" and x.role in NORM_ROLES)
    attention_items = sum(x.bytes for x in block if x.part == "attention")
    attention_norm = sum(x.bytes for x in block if x.site == "attention" and x.role in NORM_ROLES)
    moments = (
        Moment("mlp", math.ceil(mlp_released / tensor), math.ceil(mlp_flow / tensor), math.ceil(weights_mlp / tensor)),
        Moment("mlp norm", mlp_items - mlp_norm, norm_flow, math.ceil(weights_all_mlp / tensor)),
        Moment("attention", math.ceil(mlp_items + attention_released / tensor), math.ceil(attention_flow / tensor),
               math.ceil(weights_attention / tensor)),
        Moment("attention norm", mlp_items + attention_items - attention_norm, norm_flow,
               math.ceil(weights_layer / tensor)),
    )
    return moments, norm_flow


def _first_layer_saving(block: tuple[Saved, ...], adapted: _Adapted, checkpointing: str) -> int:
    """With LoRA the embeddings are frozen: the first layer's input needs no gradient, so its
    first norm keeps nothing, nor does its attention if no adapter sits there."""
    if adapted.full or checkpointing == "full":
        return 0
    if not any(adapted.adapts(role) for role in ("attn_in", "attn_out", "attn_inner")):
        return sum(x.bytes for x in block if x.part == "attention")
    return sum(x.bytes for x in block if x.site == "attention" and x.role == "norm")


def _shard(size: int, tensor: int, sequence_parallel: bool) -> int:
    return math.ceil(size / tensor) if sequence_parallel else size


def _split(item: Saved, tensor: int, sequence_parallel: bool) -> Saved:
    if tensor == 1:
        return item
    divide = item.tensor_parallel or sequence_parallel
    return replace(item, bytes=math.ceil(item.bytes / tensor) if divide else item.bytes)


# Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (2022),
# eq. 1 and table 2: a GPT layer with 16-bit activations and no recomputation keeps
# sbh(34 + 5as/h) = 34sbh + 5as^2b bytes (s sequence, b micro-batch, h hidden size, a heads).
# 34sbh is what selective recomputation keeps: all but the score matrices (softmax, its
# dropout mask and output: 5as^2b), which flash attention never stores either.

@dataclass(frozen=True)
class KorthikantiLayer:
    """Bytes of one GPT layer's activations by Korthikanti et al.'s formula."""

    linear_bytes: int  # 34sbh
    scores_bytes: int  # 5as^2b

    @property
    def total_bytes(self) -> int:
        return self.linear_bytes + self.scores_bytes


def korthikanti_layer_bytes(batch: int, sequence: int, hidden: int, heads: int) -> KorthikantiLayer:
    """Korthikanti et al. (2022), eq. 1: 34sbh + 5as^2b bytes per layer, 16-bit activations,
    no recomputation, no tensor parallelism."""
    return KorthikantiLayer(linear_bytes=34 * sequence * batch * hidden,
                            scores_bytes=5 * heads * sequence * sequence * batch)


def layer_activation_bytes(summary: ModelSummary, spec: ArchSpec, traits: ModelTraits, setup: TrainingSetup,
                           tensor: int = 1, sequence_parallel: bool = True) -> int:
    """Bytes one transformer layer keeps for its backward pass (per micro-batch)."""
    model = activation_model(summary, spec, traits, setup, tensor, sequence_parallel)
    return model.layer_bytes(setup.checkpointing)
