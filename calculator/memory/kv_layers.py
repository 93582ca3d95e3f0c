"""What a KV cache holds, layer by layer: one description, and each runtime's policy on top.

The description (from the model's ArchSpec) gives every self-attention layer of the decoder, in
model order, with what one token adds to it:

- `full`: keys and values of every key/value head, for every token of the sequence;
- `sliding`: the same, but the layer attends to `window` tokens only, so a runtime may drop
  older ones (whether it does is its policy, not the model's);
- `mla`: multi-head latent attention (DeepSeek-V2/V3), one compressed latent of kv_lora_rank
  numbers plus the rotary key part of qk_rope_head_dim numbers per token, shared by the heads;
- `linear`: a linear-attention layer of a hybrid model (Qwen3-Next's gated DeltaNet, named
  `linear_attention` in the config's layer_types): no keys and values per token, but a fixed
  state per sequence, a short convolution window over the projected queries, keys and values
  (conv_channels x conv_kernel numbers) and a recurrent matrix per value head
  (state_values = value heads x key size x value size). ArchSpec counts these layers as full
  attention; the description reads them from the config.
- cross-attention layers (encoder-decoder) keep the encoder's tokens; they are listed apart.

The runtimes differ only in how many tokens (cells, blocks) each layer keeps:

- transformers (inference.kv_cache_bytes): DynamicCache keeps every token; sliding layers
  keep window - 1 (DynamicSlidingWindowLayer); StaticCache allocates max_cache_len up front;
  QuantizedCache stores int4/int2 beyond a residual of recent tokens.
- vLLM and SGLang (serving.py kv_groups): blocks of 16 tokens (vLLM) or single tokens (SGLang)
  from one pool; vLLM's hybrid allocator keeps window - 1 + a prefill chunk for sliding layers.
- llama.cpp (llama_cpp.kv_cache): a linear layer keeps one state per slot in float32, the
  convolution window less its oldest column (llama_hparams n_embd_r = (d_conv - 1) x channels,
  n_embd_s = d_state x d_inner; llama_memory_recurrent with GGML_TYPE_F32, max(1, n_seq_max)
  cells). vLLM and SGLang keep those states in their pools in their own layout, which `serve`
  does not price: it refuses such models.
- llama.cpp (llama_cpp.kv_cache): `n_ctx` cells for every layer; a sliding layer gets fewer
  cells only for the architectures llama.cpp itself runs with sliding-window attention (its
  hparams set swa_type): Mistral-7B-v0.1 is converted as `llama`, whose hparams set none, so
  llama.cpp gives its layers the whole context (src/models/llama.cpp load_arch_hparams).
"""

from __future__ import annotations

from dataclasses import dataclass

from calculator.models.architecture import ArchSpec


@dataclass(frozen=True)
class CacheLayer:
    """One self-attention layer: what one token adds to its keys and to its values."""

    kind: str  # "full", "sliding", "mla" or "linear"
    kv_heads: int  # MLA: 1, the latent every head shares; linear: 0
    k_dim: int  # per head (MLA: the latent and the rotary key part together)
    v_dim: int  # per head (MLA: 0, the values are read from the latent)
    window: int | None = None
    conv_channels: int = 0  # linear: channels of the short convolution (queries, keys, values)
    conv_kernel: int = 0  # linear: its width in tokens
    state_values: int = 0  # linear: numbers of the recurrent state, per sequence
    chunked: bool = False  # sliding: the window is an attention chunk (Llama 4), which vLLM sizes apart

    @property
    def k_values(self) -> int:
        return self.kv_heads * self.k_dim

    @property
    def v_values(self) -> int:
        return self.kv_heads * self.v_dim

    @property
    def values_per_token(self) -> int:
        return self.k_values + self.v_values

    def heads_per_gpu(self, tensor: int) -> int:
        """Key/value heads one tensor-parallel rank keeps: split, never fewer than one (replicated
        when there are fewer heads than GPUs); MLA's one latent is never split."""
        return self.kv_heads if self.kind == "mla" else max(1, self.kv_heads // tensor)


def layer_of(spec: ArchSpec, group) -> CacheLayer:
    if spec.mla_expanded_dim:  # architecture.py stores MLA as one head of (latent, rotary part)
        return CacheLayer("mla", group.kv_heads, group.k_dim + group.v_dim, 0, None)
    kind = "sliding" if group.window is not None else "full"
    return CacheLayer(kind, group.kv_heads, group.k_dim, group.v_dim, group.window, chunked=group.chunked)


LINEAR_LAYER_TYPES = frozenset({"linear_attention"})


def linear_layer(config: dict) -> CacheLayer:
    """A gated-DeltaNet layer from the config's linear_* keys (transformers' Qwen3Next
    GatedDeltaNet: conv_dim = 2 x key heads x key size + value heads x value size)."""
    def number(key: str) -> int:
        value = config.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    key_heads, value_heads = number("linear_num_key_heads"), number("linear_num_value_heads")
    key_dim, value_dim = number("linear_key_head_dim"), number("linear_value_head_dim")
    channels = 2 * key_heads * key_dim + value_heads * value_dim
    return CacheLayer("linear", 0, 0, 0, None, channels, number("linear_conv_kernel_dim"),
                      value_heads * key_dim * value_dim)


def cache_layers(spec: ArchSpec, config: dict | None = None) -> tuple[CacheLayer, ...]:
    """The decoder's self-attention layers in model order. ArchSpec keeps one group per kind;
    the kinds are interleaved in proportion (Gemma 2 alternates sliding and full layers,
    Gemma 3 puts one full layer after five sliding ones), which is where llama.cpp's -ngl
    cut falls. With the config, layers its layer_types call linear attention are described as
    such (ArchSpec counts them as full attention)."""
    layers = _attention_layers(spec)
    kinds = (config or {}).get("layer_types")
    if not isinstance(kinds, (list, tuple)) or len(kinds) != len(layers) \
            or not LINEAR_LAYER_TYPES.intersection(map(str, kinds)):
        return layers
    linear = linear_layer(config)
    return tuple(linear if str(kind) in LINEAR_LAYER_TYPES else layer for kind, layer in zip(kinds, layers))


def has_linear_layers(spec: ArchSpec, config: dict | None) -> bool:
    return any(layer.kind == "linear" for layer in cache_layers(spec, config))


def _attention_layers(spec: ArchSpec) -> tuple[CacheLayer, ...]:
    groups = [g for g in spec.attention if not g.cross]
    if not groups:
        return ()
    total = sum(g.layers for g in groups)
    placed = [0] * len(groups)
    layers = []
    for i in range(total):
        # the group furthest behind its share goes next
        best = min(range(len(groups)), key=lambda g: (placed[g] - groups[g].layers * (i + 1) / total, g))
        placed[best] += 1
        layers.append(layer_of(spec, groups[best]))
    return tuple(layers)
