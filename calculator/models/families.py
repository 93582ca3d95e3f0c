"""Per-family facts: how each transformers `model_type` behaves where memory is concerned.

One table, read by every formula: the shape reader (architecture.py), the inference
activation model (activations.py), the training model (training/) and the config checks
(configs.py). A family that is not in the table takes the Llama layout, the one most
recent decoders in transformers 5 derive from (their figures are then the closest layout's,
not a measured one).

Pure data and pure functions: nothing here imports torch or transformers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Config keys that give the number of routed experts and how many of them each token uses.
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
EXPERT_TOPK_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_top_k")

# Activation functions after which a family without an entry is read as gated (SwiGLU-like).
GATED_ACTIVATIONS = ("silu", "swiglu", "gelu_pytorch_tanh", "gelu")


@dataclass(frozen=True)
class Family:
    """How one family's code differs from Llama's where memory is concerned.

    kind: decoder, encoder or vision (an encoder-decoder is read from `is_encoder_decoder`).
    norm: "rms" (RMSNorm computed in float32, Llama), "gemma" (RMSNorm whose normalised
      values stay in float32), "layer" (nn.LayerNorm, one output).
    positions: "rotary" (cos/sin tables), "learned" (an embedding), "relative" (T5's bias).
    fused_qkv: one projection for q, k and v, which stay views of it (GPT-2's c_attn).
    keeps_attention_output: the attention's output is still referenced in the MLP (GPT-2).
    float32_softmax: eager softmax in float32, then cast back; GPT-2's and T5's stay in the
      compute dtype.
    gated_mlp: False for families whose MLP is never gated; None: gated after a GATED_ACTIVATIONS.
    t5_feed_forward: the activation and its gating come from `feed_forward_proj` /
      `dense_act_fn` / `is_gated_act`, and the feed-forward drops out its inner activations.
    post_norm: the encoder normalises after the residual sum (BERT, RoBERTa): the attention
      reads the layer's input itself, the MLP the attention's (normalised) output.
    attention_sinks: eager attention concatenates a learned logit per head to the scores
      (gpt-oss), then shifts and softmaxes them in the compute dtype.
    biased_experts: the experts gather a bias row per routed copy of a token and gate through
      clamps and a sigmoid (gpt-oss's _apply_gate), not act(gate) * up.
    """

    kind: str = "decoder"
    norm: str = "rms"
    positions: str = "rotary"
    fused_qkv: bool = False
    keeps_attention_output: bool = False
    float32_softmax: bool = True
    gated_mlp: bool | None = None
    t5_feed_forward: bool = False
    post_norm: bool = False  # BERT's layout: LayerNorm after each residual sum, so no normed copy of the input
    attention_sinks: bool = False
    biased_experts: bool = False

    @property
    def generates(self) -> bool:
        """Whether the family has a decoder that produces tokens one by one."""
        return self.kind == "decoder"


_LEARNED_LAYER = dict(norm="layer", positions="learned", gated_mlp=False)
_ENCODER = dict(kind="encoder", post_norm=True, **_LEARNED_LAYER)
_VISION = dict(kind="vision", **_LEARNED_LAYER)
_T5 = dict(positions="relative", float32_softmax=False, t5_feed_forward=True)

FAMILIES: dict[str, Family] = {
    # Llama-style decoders (RMSNorm in float32, rotary positions): the default, listed for clarity.
    **{name: Family() for name in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                                   "deepseek_v2", "deepseek_v3", "phi3", "granite", "olmo2", "cohere2",
                                   "ministral",
                                   # 2025-26: Llama 4 (chunked
                                   # attention in layer_types), SmolLM3, Qwen2.5-VL's language model
                                   "llama4", "llama4_text", "smollm3", "qwen2_5_vl", "qwen2_5_vl_text",
                                   "mistral3")},
    "gpt_oss": Family(attention_sinks=True, biased_experts=True),
    **{name: Family(norm="gemma") for name in ("gemma", "gemma2", "gemma3", "gemma3_text")},
    "gpt2": Family(norm="layer", positions="learned", fused_qkv=True, keeps_attention_output=True,
                   float32_softmax=False, gated_mlp=False),
    "gpt_bigcode": Family(norm="layer", positions="learned", fused_qkv=True, gated_mlp=False),
    "opt": Family(**_LEARNED_LAYER),
    "bart": Family(**_LEARNED_LAYER),
    "whisper": Family(**_LEARNED_LAYER),  # BART's layout; the encoder reads audio frames (1,500 per 30 s)
    "gpt_neox": Family(norm="layer", fused_qkv=True, gated_mlp=False),
    "falcon": Family(norm="layer", fused_qkv=True, gated_mlp=False),
    "phi": Family(norm="layer", gated_mlp=False),
    **{name: Family(**_T5) for name in ("t5", "mt5", "umt5")},
    **{name: Family(**_ENCODER) for name in ("bert", "roberta", "distilbert", "deberta", "deberta-v2", "electra",
                                             "albert", "xlm-roberta", "camembert")},
    # ModernBERT: rotary positions and a gated MLP (Wi yields the GeGLU's two halves), LayerNorm
    "modernbert": Family(kind="encoder", norm="layer", positions="rotary", gated_mlp=True),
    **{name: Family(**_VISION) for name in ("vit", "deit", "beit", "swin", "dinov2", "convnext")},
}

# The families whose activation code was read line by line and is measured on the CPU
# (bench/activations.py); the others follow the closest layout.
MEASURED_FAMILIES = ("llama", "mistral", "mixtral", "gemma2", "gpt2", "t5")


DEFAULT_FAMILY = Family()


def family_of(model_type: str) -> Family:
    """The family's facts (the Llama layout for a family outside the table)."""
    return FAMILIES.get(str(model_type or ""), DEFAULT_FAMILY)


def first_positive(table, keys: tuple[str, ...]) -> int | None:
    """The first of `keys` that a config (dict or transformers object) sets to a positive int."""
    for key in keys:
        value = table.get(key) if isinstance(table, Mapping) else getattr(table, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


# What the config says about how the layers compute, beyond their shapes ------------------

@dataclass(frozen=True)
class ModelTraits:
    """Norm kind, activation function and dropout rates: what the training model reads."""

    norm: str = "layer"  # rms (float32 upcast, Llama style), gemma, layer (nn.LayerNorm)
    activation: str = "gelu"
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    embedding_dropout: float = 0.0
    activation_dropout: float = 0.0


def traits_from_config(config: Mapping | None, model_type: str = "") -> ModelTraits:
    """Norm kind, activation function and dropout rates from a config dict (None: defaults
    from the model type)."""
    config = config or {}
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    model_type = str(config.get("model_type") or model_type)
    family = family_of(model_type)
    act = _first(text, ("hidden_act", "hidden_activation", "activation_function", "activation", "dense_act_fn"), str)
    if family.t5_feed_forward:  # "relu" (the default) or "gated-gelu", the tanh form
        act = "gelu_new" if "gelu" in str(text.get("feed_forward_proj") or "") else "relu"
    hidden = _first(text, ("resid_pdrop", "hidden_dropout_prob", "hidden_dropout", "dropout_rate", "dropout"), float)
    attention = _first(text, ("attn_pdrop", "attention_probs_dropout_prob", "attention_dropout", "dropout_rate"), float)
    embedding = _first(text, ("embd_pdrop", "embedding_dropout"), float)
    activation = _first(text, ("activation_dropout",), float)
    if embedding is None:
        embedding = hidden
    if family.t5_feed_forward:
        activation = hidden  # T5's feed-forward drops out its inner activations too
    return ModelTraits(norm=family.norm, activation=str(act or ""), hidden_dropout=hidden or 0.0,
                       attention_dropout=attention or 0.0, embedding_dropout=embedding or 0.0,
                       activation_dropout=activation or 0.0)


def _first(config: Mapping, keys: tuple[str, ...], kind):
    for key in keys:
        value = config.get(key)
        if value is None or isinstance(value, bool):
            continue
        if kind is float and isinstance(value, (int, float)) and 0 <= value < 1:
            return float(value)
        if kind is str and isinstance(value, str):
            return value
    return None
