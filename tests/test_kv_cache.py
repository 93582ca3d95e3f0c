"""KV-cache bytes: by hand for real configs, and equal to the cache transformers builds."""

from __future__ import annotations

import pytest
import torch
import transformers

from calculator.models import catalog
from calculator.models.architecture import spec_from_config
from calculator.memory.inference import kv_bytes_per_token, kv_cache_bytes
from calculator.models.meta import make_config
from tests.conftest import load_test_config


def test_llama_2_7b_by_hand():
    spec = catalog.stored_spec("llama-2-7b")  # 32 layers, 32 KV heads of 128
    assert kv_bytes_per_token(spec, "float16") == 2 * 32 * 32 * 128 * 2 == 524_288
    assert kv_cache_bytes(spec, batch=4, tokens=4096, kv_dtype="float16") == 4 * 4096 * 524_288


def test_mistral_grouped_query_and_sliding_window_by_hand():
    spec = catalog.stored_spec("mistral-7b-v0.1")  # 8 KV heads, window 4096
    per_token = 2 * 32 * 8 * 128 * 2
    assert kv_cache_bytes(spec, 1, 1000, "bfloat16") == 1000 * per_token
    assert kv_cache_bytes(spec, 1, 32_000, "bfloat16") == 4095 * per_token  # the window caps it


def test_multi_query_by_hand():
    spec = catalog.stored_spec("falcon-7b")  # one KV head of 64, 32 layers
    assert kv_bytes_per_token(spec, "bfloat16") == 2 * 32 * 1 * 64 * 2


def test_encoder_decoder_adds_cross_attention_by_hand():
    spec = catalog.stored_spec("t5-base")  # 12 decoder layers, 12 heads of 64
    self_attn = 2 * 12 * 12 * 64 * 100 * 4
    cross = 2 * 12 * 12 * 64 * 512 * 4
    assert kv_cache_bytes(spec, 1, 100, "float32", encoder_tokens=512) == self_attn + cross


def test_fp8_cache_halves_bf16():
    spec = catalog.stored_spec("llama-3-8b")
    assert 2 * kv_cache_bytes(spec, 2, 8192, "float8") == kv_cache_bytes(spec, 2, 8192, "bfloat16")


def test_latent_attention_is_much_smaller_than_expanded_heads():
    spec = catalog.stored_spec("deepseek-v3")  # kv_lora_rank 512 + rope 64 per token per layer
    assert kv_bytes_per_token(spec, "bfloat16") == 61 * (512 + 64) * 2
    assert kv_bytes_per_token(spec, "bfloat16", layout="expanded") == 61 * 128 * (128 + 64 + 128) * 2


def test_encoder_only_models_have_no_cache():
    assert kv_cache_bytes(catalog.stored_spec("bert-base-cased"), 8, 512) == 0


TINY = {
    "llama (GQA)": lambda: load_test_config("tiny-llama"),
    "gemma2 (mixed sliding/full)": lambda: load_test_config("tiny-gemma2"),
    "mistral (sliding window)": lambda: {**catalog.config("mistral-7b-v0.1"), "hidden_size": 64, "num_attention_heads": 4,
                                          "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 96,
                                          "vocab_size": 300, "sliding_window": 16},
    "falcon (multi-query)": lambda: {**catalog.config("falcon-7b"), "hidden_size": 64, "num_attention_heads": 4,
                                     "num_hidden_layers": 2, "vocab_size": 300},
    "deepseek (MLA)": lambda: {**catalog.config("deepseek-v2-lite"), "hidden_size": 64, "num_hidden_layers": 2,
                               "num_attention_heads": 4, "num_key_value_heads": 4, "kv_lora_rank": 16,
                               "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "intermediate_size": 96,
                               "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
                               "n_shared_experts": 1, "vocab_size": 300},
}


def cache_bytes(cache) -> int:
    layers = list(cache.layers) if hasattr(cache, "layers") else []
    if hasattr(cache, "self_attention_cache"):
        layers = list(cache.self_attention_cache.layers) + list(cache.cross_attention_cache.layers)
    return sum(t.numel() * t.element_size() for layer in layers for t in (layer.keys, layer.values))


@pytest.mark.parametrize("name", list(TINY))
@pytest.mark.parametrize("batch,tokens", [(2, 40), (1, 7)])
def test_equals_the_cache_transformers_builds(name, batch, tokens):
    config = TINY[name]()
    cfg = make_config(config)
    torch.manual_seed(0)
    model = getattr(transformers, config["architectures"][0])._from_config(cfg, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(torch.randint(0, cfg.vocab_size, (batch, tokens)), use_cache=True)
    assert cache_bytes(out.past_key_values) == kv_cache_bytes(spec_from_config(cfg), batch, tokens, "float32")


def test_equals_the_encoder_decoder_cache_transformers_builds():
    config = {**catalog.config("t5-small"), "d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4, "d_kv": 16,
              "vocab_size": 300}
    cfg = make_config(config)
    model = transformers.T5ForConditionalGeneration._from_config(cfg, dtype=torch.float32).eval()
    with torch.no_grad():
        out = model(input_ids=torch.randint(0, 300, (2, 30)), decoder_input_ids=torch.randint(0, 300, (2, 9)),
                    use_cache=True)
    assert cache_bytes(out.past_key_values) == kv_cache_bytes(spec_from_config(cfg), 2, 9, "float32", encoder_tokens=30)
