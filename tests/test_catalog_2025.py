"""The 2025-26 families of the catalog: each count against its model card, each architectural
feature (sliding windows, chunked attention, attention sinks, experts, vision towers) read from
the published config and priced in the key/value cache by hand."""

from __future__ import annotations

import pytest

from calculator.models import catalog
from calculator.memory.inference import kv_bytes_per_token, kv_cache_bytes

# Published parameter counts: (count, where it is published and what it counts).
PUBLISHED = {
    "gpt-oss-20b": (20.91e9, "gpt-oss model card, arXiv 2508.10925, table 1: total parameters"),
    "gpt-oss-120b": (116.83e9, "gpt-oss model card, arXiv 2508.10925, table 1: total parameters"),
    "qwen3-0.6b": (0.6e9, "huggingface.co/Qwen/Qwen3-0.6B model card: 0.6B"),
    "qwen3-8b": (8.2e9, "huggingface.co/Qwen/Qwen3-8B model card: 8.2B"),
    "qwen3-32b": (32.8e9, "huggingface.co/Qwen/Qwen3-32B model card: 32.8B"),
    "qwen3-235b-a22b": (235e9, "huggingface.co/Qwen/Qwen3-235B-A22B model card: 235B in total"),
    "gemma-3-1b": ((302 + 698) * 1e6, "Gemma 3 report, arXiv 2503.19786, table 1: embedding + non-embedding"),
    "gemma-3-27b": ((417 + 1416 + 25600) * 1e6, "Gemma 3 report, arXiv 2503.19786, table 1: vision + embedding + "
                                                 "non-embedding"),
    "llama-4-scout": (109e9, "huggingface.co/meta-llama/Llama-4-Scout-17B-16E-Instruct model card: 109B total"),
    "llama-4-maverick": (400e9, "huggingface.co/meta-llama/Llama-4-Maverick-17B-128E-Instruct model card: 400B"),
    "deepseek-r1-distill-qwen-1.5b": (1.78e9, "Hub page of the checkpoint: safetensors, 1.78B params"),
    "deepseek-r1-distill-qwen-7b": (7.62e9, "Hub page of the checkpoint: safetensors, 7.62B params"),
    "deepseek-r1-distill-llama-8b": (8.03e9, "Hub page of the checkpoint: safetensors, 8.03B params"),
    "phi-4": (14.7e9, "Hub page of microsoft/phi-4: safetensors, 14.7B params"),
    "mistral-small-24b": (24e9, "huggingface.co/mistralai/Mistral-Small-24B-Instruct-2501 model card: 24B"),
    "mistral-small-3.1-24b": (24e9, "huggingface.co/mistralai/Mistral-Small-3.1-24B-Instruct-2503 model card: "
                                    "24 billion parameters"),
    "smollm3-3b": (3.08e9, "Hub page of HuggingFaceTB/SmolLM3-3B: safetensors, 3.08B params"),
    "qwen2.5-vl-7b": (8.29e9, "Hub page of Qwen/Qwen2.5-VL-7B-Instruct: safetensors, 8.29B params"),
    "modernbert-base": (149e6, "ModernBERT paper, arXiv 2412.13663: 149M"),
    "modernbert-large": (395e6, "ModernBERT paper, arXiv 2412.13663: 395M"),
    "bge-base-en-v1.5": (109e6, "Hub page of BAAI/bge-base-en-v1.5: 109M params"),
    "bge-large-en-v1.5": (335e6, "Hub page of BAAI/bge-large-en-v1.5: 335M params"),
    "bge-m3": (568e6, "Hub page of BAAI/bge-m3: 568M params"),
    "e5-base-v2": (109e6, "Hub page of intfloat/e5-base-v2: 109M params"),
    "multilingual-e5-large": (560e6, "multilingual E5 report, arXiv 2402.05672, table 1: 560M"),
}


@pytest.mark.parametrize("key", PUBLISHED)
def test_counts_within_two_percent_of_the_model_card(key):
    published, _source = PUBLISHED[key]
    counted = catalog.stored_summary(key).parameters
    assert abs(counted - published) / published < 0.02, (key, counted, published)


def test_every_new_entry_names_where_its_config_was_published():
    for key in PUBLISHED:
        entry = catalog.find(key)
        assert entry.source.startswith(f"https://huggingface.co/{entry.id}/"), key
        assert entry.config_path.is_file()


@pytest.mark.parametrize("hub_id,key", [
    ("openai/gpt-oss-20b", "gpt-oss-20b"), ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b"),
    ("google/gemma-3-27b-it", "gemma-3-27b"), ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"),
    ("BAAI/bge-m3", "bge-m3"), ("answerdotai/ModernBERT-base", "modernbert-base"),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-vl-7b"), ("microsoft/phi-4", "phi-4"),
    ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral-small-3.1-24b"),
])
def test_a_hub_id_finds_its_entry_offline(hub_id, key):
    assert catalog.find(hub_id).key == key


def test_active_parameters_match_the_published_ones():
    # gpt-oss card, table 1: active 3.61B (20b) and 5.13B (120b), counting the unembedding but
    # not the input embedding (201,088 x 2,880 = 579,133,440). Qwen3-235B-A22B: 22B activated.
    # Llama 4: 17B active, without the input embedding (202,048 x 5,120 = 1,034,485,760).
    embedding = 201_088 * 2_880
    assert round((catalog.stored_summary("gpt-oss-20b").active_parameters - embedding) / 1e9, 2) == 3.61
    assert round((catalog.stored_summary("gpt-oss-120b").active_parameters - embedding) / 1e9, 2) == 5.13
    assert round(catalog.stored_summary("qwen3-235b-a22b").active_parameters / 1e9) == 22
    for key in ("llama-4-scout", "llama-4-maverick"):
        assert round((catalog.stored_summary(key).active_parameters - 202_048 * 5_120) / 1e9) == 17


def test_gpt_oss_attention_sinks_are_one_learned_logit_per_head_and_layer():
    # gpt-oss-20b: 24 layers x 64 heads; they are the only parameters outside linears, norms
    # and embeddings.
    assert catalog.stored_summary("gpt-oss-20b").groups["other"] == 24 * 64


def test_gemma_3_27b_counts_its_vision_tower():
    # Gemma 3 report, table 1: the 27B's vision encoder is 417M; the text model alone is below.
    summary = catalog.stored_summary("gemma-3-27b")
    text_only = 1416e6 + 25600e6
    assert summary.parameters - text_only == pytest.approx(417e6, rel=0.05)


def test_mistral_small_3_1_adds_a_pixtral_tower_to_mistral_small_3():
    # Same language model as Mistral Small 3 (2501); the difference is the vision side, by hand
    # from the config: Pixtral's 14 x 14 patch convolution (3 channels, no bias) and first norm,
    # 24 layers of two norms, four 1,024 x 1,024 projections and a gated 1,024 -> 4,096 MLP; the
    # projector's norm, 2 x 2 patch merger (4,096 -> 1,024) and two layers (1,024 -> 5,120 -> 5,120).
    hidden, width = 1024, 4096
    tower = 3 * 14 * 14 * hidden + hidden + 24 * (2 * hidden + 4 * hidden * hidden + 3 * hidden * width)
    projector = hidden + 4 * hidden * hidden + hidden * 5120 + 5120 * 5120
    vision = catalog.stored_summary("mistral-small-3.1-24b").parameters
    assert vision - catalog.stored_summary("mistral-small-24b").parameters == tower + projector
    # its own output head, as the checkpoint ships it (131,072 x 5,120)
    assert catalog.stored_summary("mistral-small-3.1-24b").groups["head"] == 131_072 * 5_120
    assert _groups("mistral-small-3.1-24b") == {None: 40}


def _groups(key):
    """{window (None: full attention): layers}"""
    return {g.window: g.layers for g in catalog.stored_spec(key).attention}


def test_layer_types_follow_the_published_configs():
    assert _groups("gpt-oss-20b") == {128: 12, None: 12}  # alternating, window 128
    assert _groups("gpt-oss-120b") == {128: 18, None: 18}
    assert _groups("gemma-3-27b") == {1024: 52, None: 10}  # 5 local : 1 global over 62 layers
    assert _groups("gemma-3-1b") == {512: 22, None: 4}
    # Llama 4: every fourth layer (no rotary positions) attends globally, the others in chunks.
    assert _groups("llama-4-scout") == {8192: 36, None: 12}
    assert _groups("llama-4-maverick") == {8192: 36, None: 12}
    assert _groups("qwen3-235b-a22b") == {None: 94}


KiB = 1024


@pytest.mark.parametrize("key,per_token", [
    # layers x key/value heads x (key + value head size) x 2 bytes (bfloat16), by hand.
    ("gpt-oss-20b", 24 * 8 * (64 + 64) * 2),
    ("gemma-3-27b", 62 * 16 * (128 + 128) * 2),
    ("llama-4-scout", 48 * 8 * (128 + 128) * 2),
    ("qwen3-235b-a22b", 94 * 4 * (128 + 128) * 2),
    ("qwen3-8b", 36 * 8 * (128 + 128) * 2),
    ("phi-4", 40 * 10 * (128 + 128) * 2),
    ("mistral-small-3.1-24b", 40 * 8 * (128 + 128) * 2),
])
def test_kv_bytes_per_token(key, per_token):
    assert kv_bytes_per_token(catalog.stored_spec(key), "bfloat16") == per_token


def test_long_context_cache_caps_the_windowed_layers():
    # transformers keeps window - 1 tokens in a sliding (or chunked) layer, every token in a
    # full one. 131,072 tokens, batch 1, bfloat16.
    tokens = 131_072
    gpt_oss = 12 * tokens * 8 * 128 * 2 + 12 * 127 * 8 * 128 * 2
    assert kv_cache_bytes(catalog.stored_spec("gpt-oss-20b"), 1, tokens) == gpt_oss
    gemma = 10 * tokens * 16 * 256 * 2 + 52 * 1023 * 16 * 256 * 2
    assert kv_cache_bytes(catalog.stored_spec("gemma-3-27b"), 1, tokens) == gemma
    scout = 12 * tokens * 8 * 256 * 2 + 36 * 8191 * 8 * 256 * 2
    assert kv_cache_bytes(catalog.stored_spec("llama-4-scout"), 1, tokens) == scout
    # Without the windows the same contexts would cost 2 x, 5.4 x and 3.7 x as much.
    assert gpt_oss * 1.9 < 24 * tokens * 8 * 128 * 2


def test_encoders_and_embedding_models_have_no_cache():
    for key in ("modernbert-base", "bge-m3", "multilingual-e5-large"):
        spec = catalog.stored_spec(key)
        assert spec.kind == "encoder" and kv_bytes_per_token(spec) == 0


def test_moe_experts_are_counted_as_experts():
    # gpt-oss-20b: 24 layers x 32 experts x (2,880 x 5,760 gate_up + 2,880 x 2,880 down); their
    # biases (5,760 + 2,880 each) are biases, kept in bfloat16 by the MXFP4 checkpoint.
    groups = catalog.stored_summary("gpt-oss-20b").groups
    assert groups["experts"] == 24 * 32 * (2880 * 2 * 2880 + 2880 * 2880)
    assert groups["bias"] >= 24 * 32 * (5760 + 2880)
    # Qwen3-235B-A22B: 94 layers x 128 experts x 3 matrices of 4,096 x 1,536.
    assert catalog.stored_summary("qwen3-235b-a22b").groups["experts"] == 94 * 128 * 3 * 4096 * 1536
