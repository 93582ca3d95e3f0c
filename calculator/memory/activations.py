"""The activation peak of a forward pass, step by step, as transformers 5 allocates it.

Besides its weights and its cache, a forward holds two kinds of tensors: some live for the
whole pass (the embeddings the model keeps a reference to, rotary tables, attention masks,
T5's position bias), others only during one step of one layer (the MLP's expansion, the
attention scores, the logits). The peak is the largest sum over those steps. All layers of
a stack are alike and the cache grows layer by layer, so a decoder's peak comes in its last
layer or at the logits; an encoder-decoder's may come in the encoder, before any cache.

Each count below was read from the modeling code of transformers 5 (llama, mistral,
mixtral, gemma2, gpt2, t5 and the shared attention, mask, cache and MoE code) and is
checked against live tensor bytes on the CPU by bench/activations.py. Other families use the
closest layout (families.py); their figures follow the same code paths but are not measured.
Kernel workspaces and the CUDA caching allocator are outside this model (see bench/measure.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calculator.models.architecture import ArchSpec, attention_run
from calculator.models.families import Family, family_of

INT64 = 8
FLOAT32 = 4


# Tensors of the MLP's width alive at once inside the activation function, its input
# included. A single kernel (silu, relu, exact gelu, tanh-gelu) gives input + output = 2.
# gelu_new is 0.5 * x * (1 + tanh(c * (x + 0.044715 * x ** 3))): Python evaluates 0.5 * x
# first, and pow, its product, the sum... each come while x and 0.5 * x are still held: 4.
# gelu_fast's x * c and 0.044715 * x * x overlap the same way: 5. quick_gelu, x * sigmoid(1.702 x): 3.
ACTIVATION_BUFFERS = {"gelu_new": 4, "gelu_fast": 5, "quick_gelu": 3}

# T5 turns every (query, key) distance into a bucket in int64 before looking up its bias:
# at the worst moment, bidirectional (encoder), the distances, the running buckets, their
# absolute values, the is-small mask (bool), the large-distance buckets, a tensor full of the
# last bucket and their minimum are all alive: 6 x 8 + 1 bytes per pair. One-directional
# (decoder): the distances, their clamped opposite, the mask and the same three: 5 x 8 + 1.
BUCKET_BYTES = {"bidirectional": 6 * INT64 + 1, "causal": 5 * INT64 + 1}

# Routing bookkeeping per routed copy of a token in the grouped_mm experts path: its top-k
# weight (float32) and expert index (int64), the sort's values and permutation (int64), the
# weight in sorted order and the histogram's float input (float32).
ROUTING_BYTES = FLOAT32 + INT64 + 2 * INT64 + FLOAT32 + FLOAT32


@dataclass(frozen=True)
class Phase:
    """One moment of the forward: the cache storage alive then, and every other live tensor."""

    name: str
    cache_bytes: int
    parts: tuple[tuple[str, int], ...] = field(default_factory=tuple)

    @property
    def activation_bytes(self) -> int:
        return sum(size for _, size in self.parts)

    @property
    def total_bytes(self) -> int:
        return self.cache_bytes + self.activation_bytes


@dataclass(frozen=True)
class _Run:
    """The sizes of one forward."""

    spec: ArchSpec
    layout: Family
    batch: int
    a: int  # bytes per element of the compute dtype
    kv: float  # bytes per element of the cache
    attention: str  # what is priced: sdpa, eager, or flash (a FlashAttention kernel the model names)
    generate: bool
    forward_only: bool = False  # mode "forward": the head's outputs, no log-probabilities

    def parts(self, **sizes: int) -> tuple[tuple[str, int], ...]:
        return tuple((name, int(size)) for name, size in sizes.items() if size)


def forward_phases(spec: ArchSpec, batch: int, tokens: int, a: int, kv_bytes: float, attention: str,
                   mode: str, decoder_tokens: int | None = None) -> list[Phase]:
    """Every moment of the forward that can hold the peak, for `batch` sequences of `tokens`
    tokens. mode "generate": the prefill of model.generate (the logits of the last position
    only); "loglikelihood": a forward with the cache transformers builds by default, then the
    float32 log-probabilities of every position. For an encoder-decoder, `tokens` are the
    encoder's and `decoder_tokens` (default: as many) the decoder's: cached when generating,
    scored when computing a log-likelihood."""
    run = _Run(spec, family_of(spec.model_type), batch, a, kv_bytes, attention_run(spec, attention),
               mode == "generate", mode == "forward")
    if spec.kind == "encoder-decoder":
        return _encoder_decoder(run, tokens, tokens if decoder_tokens is None else decoder_tokens)
    if spec.kind in ("encoder", "vision"):
        return _encoder(run, tokens, cache=0)[0]
    return _decoder_only(run, tokens)


# -- pieces shared by every stack ------------------------------------------------------------

def _scores_row_bytes(run: _Run, kv_len: int) -> int:
    """Bytes of one query's scores at the eager attention's worst moment. With attention sinks
    (gpt-oss's eager_attention_forward) three tensors in the compute dtype are alive at the
    softmax: the masked scores, the logits with each head's sink appended and shifted by their
    maximum (kv_len + 1 columns), and their softmax."""
    if run.layout.attention_sinks:
        return run.a * (kv_len + 2 * (kv_len + 1))
    return kv_len * _score_bytes(run)


def _score_bytes(run: _Run) -> int:
    """Bytes per attention score at the eager attention's worst moment. matmul then * scale,
    then + mask: two score tensors each time. Llama's softmax is computed in float32 and cast
    back while the masked scores are still referenced: a + 4 + a (float32: the cast is a no-op,
    so 2 x 4). T5's stays in the compute dtype: 2 a."""
    a = run.a
    if not run.layout.float32_softmax:
        return 2 * a
    return max(2 * a, a + FLOAT32 + (a if a != FLOAT32 else 0))


def _norm_peak(run: _Run, rows: int) -> int:
    """What a norm holds beyond its input. RMSNorm upcasts: the float32 copy and its square
    (in float32 the copy is the input itself, then the normalised tensor and the output):
    8 bytes per element either way. LayerNorm: its output, plus a float32 mean and rstd per row."""
    h = run.spec.hidden
    if run.layout.norm == "layer":
        return rows * h * run.a + 2 * rows * FLOAT32
    return rows * h * 2 * FLOAT32


def _mlp_peak(run: _Run, rows: int) -> tuple[str, int]:
    """The MLP's largest moment for `rows` positions."""
    spec, a = run.spec, run.a
    act = ACTIVATION_BUFFERS.get(spec.activation, 2)
    if spec.experts:
        return "experts", _experts_peak(run, rows)
    if spec.gated_mlp:
        # act(gate(x)) * up(x): the activation, up and their product are held together
        return "mlp", max(3, act) * rows * spec.intermediate * a
    return "mlp", act * rows * spec.intermediate * a


def _experts_peak(run: _Run, rows: int) -> int:
    """transformers 5's default experts path (grouped_mm) runs all S = tokens x k routed
    copies at once: the gathered inputs (S x h), gate and up projections (S x 2I), the
    activation and the product (S x I each); then down projection, weighting and un-sorting
    (S x h each, with the inputs still held). The router's logits (tokens x experts) stay
    referenced, and so is the routing bookkeeping (ROUTING_BYTES per routed copy). Shared
    experts run as a dense gated MLP beside them (not measured)."""
    spec, a = run.spec, run.a
    s = rows * spec.experts_per_token
    width = spec.expert_intermediate
    routed = max(s * (spec.hidden + 4 * width), 4 * s * spec.hidden) * a
    if run.layout.biased_experts:
        # gpt-oss (transformers 5.24, integrations/moe.py): beside the inputs, the gathered
        # gate/up biases and the up projection (S x 2I each), then inside _apply_gate the
        # clamped gate and up, the sigmoid's product, up + 1 and their product (S x I each)
        routed = max(s * (spec.hidden + 9 * width), 4 * s * spec.hidden) * a
    shared = 3 * rows * spec.shared_expert_intermediate * a
    return rows * spec.experts * a + max(routed + s * ROUTING_BYTES, shared)


def _heads(run: _Run) -> tuple[int, int, int]:
    spec = run.spec
    return spec.heads, spec.kv_heads, spec.head_dim


def _attention_parts(run: _Run, q_rows: int, q_len: int, kv_len: int, masked: bool, bias: bool,
                     keys_held: bool) -> dict[str, int]:
    """The attention's largest moment, beyond its input, for one layer.
    q_rows = batch x query tokens. keys_held: keys and values are local tensors (an encoder,
    no cache) rather than cache entries. masked: SDPA gets a mask, which with grouped-query
    attention makes transformers repeat keys and values for every head (no enable_gqa).
    bias: SDPA gets T5's position bias as a float mask, copied contiguous in each layer."""
    spec, a, b = run.spec, run.a, run.batch
    heads, kv_heads, d = _heads(run)
    parts = {}
    if run.layout.fused_qkv:
        parts["qkv"] = q_rows * (heads + 2 * kv_heads) * d * a
    else:
        parts["queries"] = q_rows * heads * d * a
        if keys_held:
            parts["keys_values"] = 2 * b * kv_len * kv_heads * d * a
    # repeat_kv expands then reshapes: a copy, except with one key/value head, where the
    # reshape of the expanded tensor stays a view (multi-query attention costs nothing here)
    repeat = 1 < kv_heads < heads and (run.attention == "eager" or masked)
    repeated = 2 * b * heads * kv_len * d * a if repeat else 0
    if run.attention == "eager":
        parts["repeated_keys_values"] = repeated
        parts["scores"] = b * heads * q_len * _scores_row_bytes(run, kv_len)
    else:
        # SDPA hands back one output, laid out so that transformers' transpose(1, 2).contiguous()
        # is free. The repeated keys and values and T5's bias mask (the position bias copied
        # contiguous in each layer) die with the attention function, before o_proj's output
        # comes while that output is still referenced.
        local = repeated + (heads * q_len * kv_len * a if bias else 0)
        parts["attention_output"] = q_rows * heads * d * a + max(local, q_rows * spec.hidden * a)
    return parts


def _kept_probabilities(run: _Run, q_len: int, kv_len: int) -> int:
    """Eager attention returns its probabilities, and the decoder layer keeps them in `_`
    until it returns: they live through the MLP."""
    if run.attention != "eager":
        return 0
    columns = kv_len + 1 if run.layout.attention_sinks else kv_len  # a view of the softmax, sink column cut
    return run.batch * run.spec.heads * q_len * columns * run.a


def _self_masks(run: _Run, tokens: int) -> int:
    """Masks built once per forward for the self-attention of a decoder. Eager: a float mask
    per kind of layer (full, sliding), materialised for the batch by torch.where. SDPA: no
    mask for full causal attention without padding (is_causal); a boolean one, not expanded
    over the batch, for sliding layers once the prompt reaches the window."""
    groups = [g for g in run.spec.attention if not g.cross]
    kinds = {g.window for g in groups} or {None}
    if run.attention == "eager":
        return len(kinds) * run.batch * tokens * tokens * run.a
    if run.attention == "flash":  # the kernel applies causality and windows itself
        return 0
    sliding = [w for w in kinds if w is not None and tokens >= w]
    return tokens * tokens if sliding else 0


def _prefill_cache(run: _Run, tokens: int, cross_tokens: int = 0, self_tokens: int | None = None) -> int:
    """Cache storage right after a prefill. Sliding layers keep only window - 1 tokens, but as
    a view of the prompt's keys and values: the whole prompt's storage stays until the next
    step, so it counts in full here."""
    total = 0.0
    for group in run.spec.attention:
        kept = cross_tokens if group.cross else (tokens if self_tokens is None else self_tokens)
        total += group.layers * run.batch * kept * group.values_per_token() * run.kv
    return int(total)


# -- decoder-only models --------------------------------------------------------------------

def _decoder_only(run: _Run, tokens: int) -> list[Phase]:
    spec, layout, a, b = run.spec, run.layout, run.a, run.batch
    h, n = spec.hidden, run.batch * tokens
    heads, _, d = _heads(run)
    position_rows = b if run.generate else 1  # generate passes position ids for each sequence
    held = {"embeddings": n * h * a}
    if layout.positions == "rotary":
        held["rotary_tables"] = 2 * position_rows * tokens * d * a
    elif layout.positions == "learned":
        held["position_embeddings"] = position_rows * tokens * h * a
    held["masks"] = _self_masks(run, tokens)
    if run.generate:
        held["position_ids"] = 2 * b * tokens * INT64  # generate's position ids and their copy
    # the last layer's input, held by the model's loop (the embeddings themselves in a
    # one-layer Llama; GPT-2 adds its position embeddings into a new tensor first)
    layer_input = n * h * a if spec.layers > 1 or layout.positions == "learned" else 0
    held["layer_input"] = layer_input
    cache = _prefill_cache(run, tokens)
    masked = run.attention == "sdpa" and held["masks"] > 0
    attention = _attention_parts(run, n, tokens, tokens, masked, bias=False, keys_held=False)
    kept = {"attention_probabilities": _kept_probabilities(run, tokens, tokens),
            "attention_output": n * h * a if layout.keeps_attention_output else 0}
    mlp_name, mlp = _mlp_peak(run, n)
    phases = [
        *_rotary_phase(run, cache, held, n),
        Phase("attention", cache, run.parts(**held, normed=n * h * a, **attention)),
        Phase("norm", cache, run.parts(**held, residual=n * h * a, **kept, norm=_norm_peak(run, n))),
        Phase(mlp_name, cache, run.parts(**held, residual=n * h * a, normed=n * h * a, **kept, **{mlp_name: mlp})),
    ]
    phases += _logits(run, tokens, cache, held={"last_hidden": n * h * a})
    return phases


def _rotary_phase(run: _Run, cache: int, held: dict[str, int], rows: int) -> list[Phase]:
    """The last layer applying rotary embeddings, before its keys reach the cache. q * cos,
    rotate_half(q) (a negated half, then a cat) and its product with sin are alive together
    while q, k and v still are: 3 query-sized temporaries; then the same for k, with the
    rotated q now held too."""
    if run.layout.positions != "rotary":
        return []
    spec, a = run.spec, run.a
    heads, kv_heads, d = _heads(run)
    q, k = rows * heads * d * a, rows * kv_heads * d * a
    last_layer = run.batch * (rows // run.batch) * max(g.values_per_token() for g in spec.attention) * run.kv
    return [Phase("rotary", int(cache - last_layer), run.parts(
        **held, normed=rows * spec.hidden * a, projections=q + 2 * k, rotary=max(3 * q, q + 3 * k)))]


def _logits(run: _Run, tokens: int, cache: int, held: dict[str, int]) -> list[Phase]:
    """The head. generate keeps the logits of the last position only (logits_to_keep=1) and
    copies them to float32. A log-likelihood takes every position's logits, and after the
    forward their float32 copy (none in float32) and the float32 log-probabilities; the output
    still holds the cache. Gemma 2 soft-caps the logits: divide, tanh, multiply, two at a time."""
    spec, a, b = run.spec, run.a, run.batch
    if not spec.vocab or spec.head == "classifier" or (spec.head == "none" and not run.generate):
        return []  # a classifier's few labels, or a bare model's hidden states
    vocab = spec.vocab
    if run.generate:
        return [Phase("logits", cache, run.parts(**held, logits=b * vocab * a, float32_logits=b * vocab * FLOAT32))]
    rows = b * tokens
    softcap = rows * vocab * a if spec.logit_softcap else 0
    head = Phase("head", cache, run.parts(**held, logits=rows * vocab * a, softcap=softcap))
    if run.forward_only:
        return [head]
    return [
        head,
        Phase("log_probabilities", cache, run.parts(
            **{k: v for k, v in held.items() if k == "encoder_output"},
            logits=rows * vocab * a, float32_logits=rows * vocab * FLOAT32 if a != FLOAT32 else 0,
            log_probabilities=rows * vocab * FLOAT32)),
    ]


# -- encoders and encoder-decoders (T5) -----------------------------------------------------

def _encoder(run: _Run, tokens: int, cache: int) -> tuple[list[Phase], int]:
    """A bidirectional stack without cache (T5's encoder, BERT): no mask without padding, T5's
    position bias (tokens x tokens x heads) computed by the first layer and passed along."""
    spec, layout, a = run.spec, run.layout, run.a
    h, n = spec.hidden, run.batch * tokens
    heads = spec.heads
    held = {"encoder_embeddings": n * h * a}
    if layout.positions == "relative":
        held["position_bias"] = heads * tokens * tokens * a
    elif layout.positions == "learned" and not layout.post_norm:  # BERT sums them into its embeddings
        held["position_embeddings"] = tokens * h * a
    layers = spec.encoder_layers or spec.layers
    held["layer_input"] = n * h * a if layers > 1 or layout.positions == "learned" else 0
    bias = layout.positions == "relative" and run.attention == "sdpa"
    attention = _attention_parts(run, n, tokens, tokens, masked=bias, bias=bias, keys_held=True)
    kept = {"attention_probabilities": _kept_probabilities(run, tokens, tokens)}
    mlp_name, mlp = _mlp_peak(run, n)
    normed = 0 if layout.post_norm else n * h * a  # post-norm: no normalised copy of the input
    phases = [
        Phase("encoder_attention", cache, run.parts(**held, normed=normed, **attention)),
        *_bucket_phase(run, "encoder_position_buckets", cache, {"encoder_embeddings": n * h * a},
                       n, tokens, tokens, keys_held=True, kind="bidirectional"),
        Phase("encoder_" + mlp_name, cache, run.parts(**held, residual=n * h * a, normed=normed, **kept,
                                                        **{mlp_name: mlp})),
    ]
    if spec.kind == "encoder" and spec.vocab and spec.head == "lm" and not run.generate:  # a masked-LM head
        # BERT's MLM head transforms the hidden states (dense, activation, norm) before its decoder
        transform = n * h * a if layout.post_norm else 0
        phases.append(Phase("head", cache, run.parts(last_hidden=n * h * a, head_transform=transform,
                                                     logits=n * spec.vocab * a)))
    return phases, n * h * a


def _bucket_phase(run: _Run, name: str, cache: int, held: dict[str, int], rows: int, q_len: int, kv_len: int,
                  keys_held: bool, kind: str) -> list[Phase]:
    """The first layer computing T5's position buckets, after its projections (BUCKET_BYTES)."""
    if run.layout.positions != "relative":
        return []
    spec, a = run.spec, run.a
    projections = rows * spec.heads * spec.head_dim * a * (3 if keys_held else 1)
    return [Phase(name, cache, run.parts(**held, normed=rows * spec.hidden * a, projections=projections,
                                         buckets=BUCKET_BYTES[kind] * q_len * kv_len))]


def _encoder_decoder(run: _Run, tokens: int, decoder_tokens: int) -> list[Phase]:
    spec, layout, a, b = run.spec, run.layout, run.a, run.batch
    h, heads, d = spec.hidden, spec.heads, spec.head_dim
    phases, encoder_output = _encoder(run, tokens, cache=0)
    out = {"encoder_output": encoder_output}
    if run.generate:
        # first step: each decoder layer projects the encoder output to keys and values and
        # caches a copy: at the last layer the whole cross cache, plus both projections
        first = _prefill_cache(run, tokens, cross_tokens=tokens, self_tokens=1)
        # (with the step's own small tensors: one token per sequence through the last layer)
        step = {"decoder_embeddings": b * h * a, "layer_input": b * h * a if spec.layers > 1 else 0,
                "residual": b * h * a, "normed": b * h * a, "queries": b * heads * d * a,
                "cross_position_bias": heads * tokens * a}
        phases.append(Phase("cross_cache", first, run.parts(**out, **step,
                                                            cross_projections=2 * b * tokens * heads * d * a)))
        last = _prefill_cache(run, tokens, cross_tokens=tokens, self_tokens=decoder_tokens)
        phases += _logits(run, 1, last, held=out)
        return phases
    # a scored target: the decoder runs over decoder_tokens positions, caching as it goes
    m = b * decoder_tokens
    cache = _prefill_cache(run, tokens, cross_tokens=tokens, self_tokens=decoder_tokens)
    held = {**out, "decoder_embeddings": m * h * a, "layer_input": m * h * a if spec.layers > 1 else 0,
            "cross_position_bias": heads * decoder_tokens * tokens * a}
    if layout.positions == "relative":
        held["position_bias"] = heads * decoder_tokens * decoder_tokens * a
    held["masks"] = b * decoder_tokens * decoder_tokens * a if run.attention == "eager" else 0
    bias = layout.positions == "relative" and run.attention == "sdpa"
    self_attention = _attention_parts(run, m, decoder_tokens, decoder_tokens, masked=bias, bias=bias, keys_held=False)
    cross = _attention_parts(run, m, decoder_tokens, tokens, masked=True, bias=False, keys_held=False)
    kept = {"attention_probabilities": _kept_probabilities(run, decoder_tokens, decoder_tokens)}
    kept_both = {"attention_probabilities": kept["attention_probabilities"]
                 + _kept_probabilities(run, decoder_tokens, tokens)}
    mlp_name, mlp = _mlp_peak(run, m)
    first_layer = run.batch * decoder_tokens * run.kv * sum(
        g.values_per_token() for g in spec.attention if not g.cross)
    phases += _bucket_phase(run, "position_buckets", int(first_layer),
                            {**out, "decoder_embeddings": m * h * a}, m, decoder_tokens, decoder_tokens,
                            keys_held=False, kind="causal")
    phases += [
        Phase("attention", cache, run.parts(**held, normed=m * h * a, **self_attention)),
        Phase("cross_attention", cache, run.parts(**held, residual=m * h * a, normed=m * h * a, **kept, **cross)),
        Phase(mlp_name, cache, run.parts(**held, residual=m * h * a, normed=m * h * a, **kept_both, **{mlp_name: mlp})),
    ]
    phases += _logits(run, decoder_tokens, cache, held={**out, "last_hidden": m * h * a})
    return phases
