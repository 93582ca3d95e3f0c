"""What a KV cache holds, layer by layer: one description, and each runtime's policy on top.

The description (from the model's ArchSpec) gives every self-attention layer of the decoder, in
model order, with what one token adds to it:

- `full`: keys and values of every key/value head, for every token of the sequence;
- `sliding`: the same, but the layer attends to `window` tokens only, so a runtime may drop
  older ones (whether it does is its policy, not the model's);
- `mla`: multi-head latent attention (DeepSeek-V2/V3), one compressed latent of kv_lora_rank
  numbers plus the rotary key part of qk_rope_head_dim numbers per token, shared by the heads;
- cross-attention layers (encoder-decoder) keep the encoder's tokens; they are listed apart.

The runtimes differ only in how many tokens (cells, blocks) each layer keeps:

- transformers (inference.kv_cache_bytes): DynamicCache keeps every token; sliding layers
  keep window - 1 (DynamicSlidingWindowLayer); StaticCache allocates max_cache_len up front;
  QuantizedCache stores int4/int2 beyond a residual of recent tokens.
- vLLM and SGLang (serving.py kv_groups): blocks of 16 tokens (vLLM) or single tokens (SGLang)
  from one pool; vLLM's hybrid allocator keeps window - 1 + a prefill chunk for sliding layers.
- llama.cpp (llama_cpp.kv_cache): `n_ctx` cells for every layer; a sliding layer gets fewer
  cells only for the architectures llama.cpp itself runs with sliding-window attention (its
  hparams set swa_type): Mistral-7B-v0.1 is converted as `llama`, whose hparams set none, so
  llama.cpp gives its layers the whole context (src/models/llama.cpp load_arch_hparams).
"""

from __future__ import annotations

from dataclasses import dataclass

from .architecture import ArchSpec


@dataclass(frozen=True)
class CacheLayer:
    """One self-attention layer: what one token adds to its keys and to its values."""

    kind: str  # "full", "sliding" or "mla"
    kv_heads: int  # MLA: 1, the latent every head shares
    k_dim: int  # per head (MLA: the latent and the rotary key part together)
    v_dim: int  # per head (MLA: 0, the values are read from the latent)
    window: int | None = None

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
    return CacheLayer(kind, group.kv_heads, group.k_dim, group.v_dim, group.window)


def cache_layers(spec: ArchSpec) -> tuple[CacheLayer, ...]:
    """The decoder's self-attention layers in model order. ArchSpec keeps one group per kind;
    the kinds are interleaved in proportion (Gemma 2 alternates sliding and full layers,
    Gemma 3 puts one full layer after five sliding ones), which is where llama.cpp's -ngl
    cut falls."""
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
