"""The shape of a model that memory and speed depend on, read from its transformers config:
attention layers (heads, key/value heads, head sizes, sliding windows, cross-attention,
latent attention), MLP width, experts, vocabulary. Plain data, stored for catalog models."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from calculator.models.families import EXPERT_COUNT_KEYS, EXPERT_TOPK_KEYS, GATED_ACTIVATIONS, family_of, first_positive


@dataclass(frozen=True)
class AttentionGroup:
    """Attention layers that share one cache shape."""

    layers: int
    kv_heads: int
    k_dim: int  # per head
    v_dim: int
    window: int | None = None  # sliding window: tokens a layer attends to; None = all
    cross: bool = False  # cross-attention over the encoder's output (encoder-decoder)
    # the window is an attention chunk (Llama 4): transformers caches it like a sliding window,
    # vLLM sizes it by its own rule (serving/engines.py KvGroup)
    chunked: bool = False

    def cache_tokens(self, tokens: int, encoder_tokens: int) -> int:
        """Tokens each layer of the group keeps. transformers' sliding-window cache keeps the
        last window - 1 tokens (the new token makes the window); cross-attention keeps the
        encoder's tokens."""
        if self.cross:
            return encoder_tokens
        if self.window is not None:
            return min(tokens, max(self.window - 1, 1))
        return tokens

    def values_per_token(self) -> int:
        """Cached numbers per token per layer: keys and values of every key/value head."""
        return self.kv_heads * (self.k_dim + self.v_dim)


@dataclass(frozen=True)
class ArchSpec:
    kind: str  # decoder, encoder, encoder-decoder, vision
    hidden: int
    layers: int  # decoder layers (the encoder's for encoder-only models)
    encoder_layers: int
    heads: int
    head_dim: int
    kv_heads: int
    intermediate: int  # dense MLP width
    gated_mlp: bool
    vocab: int
    experts: int = 0
    experts_per_token: int = 0
    expert_intermediate: int = 0
    shared_expert_intermediate: int = 0
    max_positions: int = 0
    attention: tuple[AttentionGroup, ...] = field(default_factory=tuple)
    # MLA: values per token per layer if keys and values were stored per head, expanded from
    # the latent; transformers (like vLLM and SGLang) stores the latent itself.
    mla_expanded_dim: int = 0
    # What the activation peak depends on beyond the sizes (activations.py): the family's
    # code, the MLP's activation function, whether transformers has an SDPA path for the
    # model (Gemma 2 has none: soft-capping), and soft-capped logits.
    model_type: str = ""
    activation: str = ""
    sdpa: bool = True
    logit_softcap: bool = False
    # What the checkpoint's class puts on top: "lm" (a language-model head over the vocabulary:
    # causal, masked or sequence-to-sequence), "classifier" (a few labels per sequence, token or
    # image) or "none" (the bare model: a decoder named so is still generated with an LM head).
    head: str = "lm"
    # Positions the encoder sees per item when its input has a fixed size: Whisper's 1,500
    # frames of a 30 s window (max_source_positions), a vision model's patches and class
    # token ((image_size / patch_size)^2 + 1). 0: the input's length is the reader's.
    encoder_tokens: int = 0
    # A model without an SDPA path whose class names fused kernels it vouches for
    # (`_compatible_flash_implementations`: gpt-oss's attention sinks): the first of them, the
    # `attn_implementation` to pass. Empty when SDPA runs, or when only eager does.
    flash_kernel: str = ""

    @property
    def has_kv_cache(self) -> bool:
        return self.kind in ("decoder", "encoder-decoder")

    def to_dict(self) -> dict:
        data = asdict(self)
        # `chunked` is stored only where set, so the catalog's stored specs of other models keep their shape
        data["attention"] = [{k: v for k, v in asdict(group).items() if k != "chunked" or v}
                             for group in self.attention]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ArchSpec:
        groups = tuple(AttentionGroup(**g) for g in data.get("attention", ()))
        return cls(**{**data, "attention": groups})


def _int(config, *names: str, default: int = 0) -> int:
    value = first_positive(config, names)
    return default if value is None else value


def _text_config(config):
    """Multimodal configs keep the language model's sizes in text_config."""
    getter = getattr(config, "get_text_config", None)
    return getter() if callable(getter) else config


def spec_from_config(config) -> ArchSpec:
    """ArchSpec from a transformers config object (sizes normalised by its attribute_map)."""
    model_type = str(getattr(config, "model_type", ""))
    text = _text_config(config)
    hidden = _int(text, "hidden_size", "d_model", "n_embd", "dim")
    heads = _int(text, "num_attention_heads", "decoder_attention_heads", "n_head", "num_heads", default=1)
    head_dim = _int(text, "head_dim", "d_kv", default=hidden // heads if heads else 0)
    kv_heads = _int(text, "num_key_value_heads", "num_kv_heads", default=heads)
    if getattr(text, "multi_query", False) and not getattr(text, "new_decoder_architecture", False):
        kv_heads = 1  # multi-query attention (Falcon-7B, StarCoder): one key/value head
    is_enc_dec = bool(getattr(config, "is_encoder_decoder", False))
    layers = _int(text, "num_decoder_layers", "decoder_layers", "num_hidden_layers", "n_layer", "num_layers")
    encoder_layers = _int(text, "encoder_layers", "num_layers") if is_enc_dec else 0
    family = family_of(model_type)
    if family.kind == "vision":
        kind = "vision"
    elif is_enc_dec:
        kind = "encoder-decoder"
    else:
        kind = family.kind
    intermediate = _int(text, "intermediate_size", "n_inner", "ffn_dim", "d_ff", "decoder_ffn_dim",
                        "ffn_hidden_size", default=4 * hidden)
    act = str(getattr(text, "hidden_act", "") or getattr(text, "hidden_activation", "") or "")
    if family.t5_feed_forward:  # T5's feed-forward names its activation and gating itself
        gated = bool(getattr(text, "is_gated_act", False))
        act = str(getattr(text, "dense_act_fn", "") or "relu")
    elif family.gated_mlp is None:
        gated = act in GATED_ACTIVATIONS
    else:
        gated = family.gated_mlp
    experts = _int(text, *EXPERT_COUNT_KEYS)
    groups = _attention_groups(text, kind, layers, kv_heads, head_dim)
    expanded = 0
    if _int(text, "kv_lora_rank"):
        expanded = heads * (_int(text, "qk_nope_head_dim") + _int(text, "qk_rope_head_dim") + _int(text, "v_head_dim"))
    return ArchSpec(
        kind=kind, hidden=hidden, layers=layers, encoder_layers=encoder_layers, heads=heads,
        head_dim=head_dim, kv_heads=kv_heads, intermediate=intermediate, gated_mlp=gated,
        vocab=_int(text, "vocab_size"),
        experts=experts,
        experts_per_token=_int(text, *EXPERT_TOPK_KEYS) if experts else 0,
        expert_intermediate=_int(text, "moe_intermediate_size", default=intermediate) if experts else 0,
        shared_expert_intermediate=(_int(text, "shared_expert_intermediate_size")
                                    or _int(text, "n_shared_experts") * _int(text, "moe_intermediate_size")) if experts else 0,
        max_positions=_int(text, "max_position_embeddings", "n_positions", "max_seq_len", "max_target_positions"),
        attention=groups,
        mla_expanded_dim=expanded,
        model_type=model_type,
        activation=act or str(getattr(text, "activation_function", "") or ""),
        sdpa=_supports_sdpa(model_type),
        flash_kernel=_flash_kernel(model_type),
        logit_softcap=bool(getattr(text, "final_logit_softcapping", None)),
        head=head_of(getattr(config, "architectures", None)),
        encoder_tokens=_fixed_encoder_tokens(config, kind),
    )


def _fixed_encoder_tokens(config, kind: str) -> int:
    """The encoder's length when the input fixes it: audio frames after Whisper's strided
    convolution (max_source_positions), or a square image's patches plus the class token."""
    if kind == "encoder-decoder":
        return _int(config, "max_source_positions")
    if kind == "vision":
        vision = getattr(config, "vision_config", None) or config
        image, patch = _int(vision, "image_size"), _int(vision, "patch_size")
        if image and patch and not isinstance(getattr(vision, "image_size", None), (list, tuple)):
            return (image // patch) ** 2 + 1
    return 0


LM_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "ForMaskedLM", "ForPreTraining")
CLASSIFIER_PARTS = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
                    "ForImageClassification", "ForMultipleChoice", "ForAudioClassification")


def head_of(architectures) -> str:
    """The head of the checkpoint's class, from its name (the first of `architectures`)."""
    name = str(architectures[0]) if isinstance(architectures, (list, tuple)) and architectures else ""
    if any(name.endswith(suffix) for suffix in LM_SUFFIXES):
        return "lm"
    if any(part in name for part in CLASSIFIER_PARTS):
        return "classifier"
    return "none" if name else "lm"


def attention_run(spec: ArchSpec, requested: str) -> str:
    """The attention a requested implementation prices as: eager stays eager; a fused kernel
    ("sdpa") is SDPA where transformers has that path, else the flash kernel the model's class
    vouches for ("flash": FlashAttention keeps no scores, no mask, no repeated keys), else eager,
    transformers' own fallback."""
    if requested == "eager" or spec.sdpa:
        return requested
    return "flash" if spec.flash_kernel else "eager"


def _model_class(model_type: str):
    try:
        import transformers
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    except ImportError:  # the catalog's stored specs need no transformers
        return None
    return getattr(transformers, MODEL_MAPPING_NAMES.get(model_type, ""), None)


def _flash_kernel(model_type: str) -> str:
    """The first fused kernel a model without SDPA lists in `_compatible_flash_implementations`
    (gpt-oss in transformers 5.24: "kernels-community/vllm-flash-attn3", FlashAttention 3 with
    its sinks, fetched by the `kernels` package). Without one, transformers runs eager."""
    model_class = _model_class(model_type)
    if model_class is None or getattr(model_class, "_supports_sdpa", True):
        return ""
    kernels = getattr(model_class, "_compatible_flash_implementations", None) or []
    return str(kernels[0]) if kernels and getattr(model_class, "_supports_flash_attn", False) else ""


def _supports_sdpa(model_type: str) -> bool:
    """Whether transformers can run this model with SDPA (its `_supports_sdpa` flag); without
    one it runs eager attention, which is what memory then follows."""
    try:
        import transformers
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    except ImportError:  # the catalog's stored specs need no transformers
        return True
    model_class = getattr(transformers, MODEL_MAPPING_NAMES.get(model_type, ""), None)
    return bool(getattr(model_class, "_supports_sdpa", True))


def _attention_groups(config, kind: str, layers: int, kv_heads: int, head_dim: int) -> tuple[AttentionGroup, ...]:
    if kind not in ("decoder", "encoder-decoder"):
        return ()
    k_dim = v_dim = head_dim
    if _int(config, "kv_lora_rank"):
        # Multi-head latent attention: one compressed latent per token, shared by every head,
        # plus the small rotary key part. transformers caches these two, not per-head K and V.
        kv_heads, k_dim, v_dim = 1, _int(config, "kv_lora_rank"), _int(config, "qk_rope_head_dim")
    counts: dict[tuple[int | None, bool], int] = {}
    for window_and_kind in _layer_windows(config, layers):
        counts[window_and_kind] = counts.get(window_and_kind, 0) + 1
    groups = [AttentionGroup(n, kv_heads, k_dim, v_dim, window, chunked=chunked)
              for (window, chunked), n in counts.items()]
    if kind == "encoder-decoder":
        groups.append(AttentionGroup(layers, kv_heads, k_dim, v_dim, None, cross=True))
    return tuple(groups)


def _layer_windows(config, layers: int) -> list[tuple[int | None, bool]]:
    """Each layer's sliding window (None: full attention) and whether that window is an
    attention chunk, from layer_types when the config names them (Gemma 2 and 3, gpt-oss, Qwen 2 with max_window_layers...), else from
    sliding_window. A chunked-attention layer (Llama 4) attends within its chunk of
    attention_chunk_size tokens; transformers caches it as a sliding window of that size
    (cache_utils.get_layer_types_and_kwargs), so it keeps at most chunk - 1 tokens too."""
    window = _positive_or_none(getattr(config, "sliding_window", None))
    chunk = _positive_or_none(getattr(config, "attention_chunk_size", None))
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, (list, tuple)) and len(layer_types) == layers:
        return [(window, False) if "sliding" in str(kind) else (chunk, chunk is not None) if "chunked" in str(kind)
                else (None, False) for kind in layer_types]
    if window is not None and getattr(config, "use_sliding_window", True) is not False:
        return [(window, False)] * layers
    return [(None, False)] * layers


def _positive_or_none(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
