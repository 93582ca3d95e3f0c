"""The 2025-26 families inside vLLM 0.19, against its published startup logs (llm-d-planner
archive, bench/data/serving_logs.json): each row's model maps to the catalog entry of the same
Hub id, and the cache layout of the sliding-window (Gemma 3, gpt-oss) and chunked-attention
(Llama 4) models is worked out by hand from vLLM's source (v1/kv_cache_interface.py
SlidingWindowSpec and ChunkedLocalAttentionSpec max_memory_usage_bytes; v1/core/kv_cache_utils.py:
groups of as many layers as the rarest kind has, num_blocks = available // (page x group size),
"GPU KV cache size" = num_blocks // groups x 16) and checked against the figures each log printed."""

from __future__ import annotations

import math

from calculator.models import catalog
from calculator.models.seam import catalog_model
from calculator.serving.engines import (concurrency, kv_groups, pool_blocks, pool_tokens, sequence_blocks)
from calculator.core.units import GIB

NEW_ROWS = {"vllm-0.19.0-h100-10": "gemma-3-27b", "vllm-0.19.0-h100-31": "llama-4-scout",
            "vllm-0.19.0-h100-33": "phi-4", "vllm-0.19.0-h100-40": "gpt-oss-20b",
            "vllm-0.19.0-h100-53": "qwen3-8b"}
BATCHED = 8192  # vLLM's default max_num_batched_tokens for `vllm serve` on an H100 (the logs set none)


def _row(row_id: str) -> dict:
    from bench.serving import rows

    return next(row for row in rows() if row["id"] == row_id)


def test_rows_map_to_the_catalog_entry_of_their_hub_id():
    """The log names its model ('non-default args: {'model': ...}'); the row uses the catalog
    entry with that exact Hub id, on the card the log reports (an H100 80GB, 79.19 GiB)."""
    from bench.serving import compared_rows

    compared = {row["id"] for row in compared_rows()}
    for row_id, key in NEW_ROWS.items():
        row = _row(row_id)
        assert row["config"] == key and catalog.find(key).id == row["model"]
        assert f"'model': '{row['model']}'" in row["quote"][0] and "H100 80GB" in row["gpu"]
        assert (row_id in compared) == (key != "gpt-oss-20b")
    # gpt-oss-20b ships MXFP4 experts, which serve has no layout for: not compared on tokens
    gpt_oss = _row("vllm-0.19.0-h100-40")
    assert gpt_oss["flags"]["quantization"] == "mxfp4" and "MXFP4" in gpt_oss["skip"]


def test_gemma_3_27b_five_sliding_layers_per_global_one():
    """62 layers: 52 with a 1,024-token window, 10 global; 16 key/value heads of 128, TP1, bfloat16.
    Page: 16 tokens x 16 heads x (128 + 128) x 2 bytes = 131,072 bytes. Groups of 10 layers (the
    global ones): ceil(52 / 10) = 6 sliding groups + 1 full = 7. A block: 10 pages."""
    groups = kv_groups(catalog_model("gemma-3-27b").spec, 1, 2)
    assert [(g.kind, g.layers, g.page_bytes, g.window) for g in groups] == \
        [("sliding", 10, 131_072, 1024)] * 6 + [("full", 10, 131_072, None)]
    # the log: 19.53 GiB available, 15,997 blocks, 36,560 tokens, 4.46x for 8,192 tokens
    assert pool_blocks(groups, int(19.525 * GIB)) <= 15_997 <= pool_blocks(groups, int(19.535 * GIB))
    assert pool_tokens(groups, 15_997) == 15_997 // 7 * 16 == 36_560
    # a sliding layer keeps window - 1 + a prefill chunk (capped by the context) and one block more
    # for a window across two blocks: ceil(min(1023 + 8192, 8192) / 16) + 1 = 513; a full one 512
    assert sequence_blocks(groups, 8192, BATCHED) == 6 * 513 + 512 == 3590
    assert round(concurrency(15_997, groups, 8192, BATCHED), 2) == 4.46


def test_gpt_oss_20b_alternating_128_token_windows():
    """24 layers: 12 with a 128-token window, 12 full; 8 key/value heads of 64, TP2 (4 per GPU).
    Page: 16 x 4 x (64 + 64) x 2 = 16,384 bytes; 2 groups of 12; a block 12 pages = 196,608 bytes.
    The sinks are per-head parameters, not cached per token: nothing in the page."""
    groups = kv_groups(catalog_model("gpt-oss-20b").spec, 2, 2)
    assert [(g.kind, g.layers, g.page_bytes, g.window) for g in groups] == \
        [("sliding", 12, 16_384, 128), ("full", 12, 16_384, None)]
    # the log: 59.32 GiB available, 323,972 blocks, 2,591,776 tokens, 316.07x
    assert pool_blocks(groups, int(59.315 * GIB)) <= 323_972 <= pool_blocks(groups, int(59.325 * GIB))
    assert pool_tokens(groups, 323_972) == 323_972 // 2 * 16 == 2_591_776
    # with 8,192 tokens a step, a 128-token window still holds a whole 8,192 context at start-up:
    # ceil(min(127 + 8192, 8192) / 16) + 1 = 513 blocks, as many as the full layer's 512 + 1
    assert sequence_blocks(groups, 8192, BATCHED) == 513 + 512
    assert round(323_972 / 1025, 2) == round(concurrency(323_972, groups, 8192, BATCHED), 2) == 316.07


def test_llama_4_scout_chunked_layers_have_no_straddle_block():
    """48 layers: 36 attend within chunks of 8,192 tokens, 12 to everything; 8 key/value heads of
    128, TP4 (2 per GPU). Page: 16 x 2 x 256 x 2 = 16,384; groups of 12: 3 chunked + 1 full.
    vLLM's ChunkedLocalAttentionSpec holds min(chunk + a prefill chunk, context) tokens, without
    the sliding window's extra block (chunks start on block boundaries): 512 blocks, not 513.
    The log prints 44.68x = 91,495 / 2,048; with the extra block it would be 91,495 / 2,051 = 44.61."""
    spec = catalog_model("llama-4-scout").spec
    assert [(g.layers, g.window, g.chunked) for g in spec.attention] == [(36, 8192, True), (12, None, False)]
    groups = kv_groups(spec, 4, 2)
    assert [(g.kind, g.layers, g.page_bytes, g.chunked) for g in groups] == \
        [("sliding", 12, 16_384, True)] * 3 + [("full", 12, 16_384, False)]
    assert pool_blocks(groups, int(16.745 * GIB)) <= 91_495 <= pool_blocks(groups, int(16.755 * GIB))
    assert pool_tokens(groups, 91_495) == 91_495 // 4 * 16 == 365_968
    assert sequence_blocks(groups, 8192, BATCHED) == 3 * math.ceil(min(8192 + 8192, 8192) / 16) + 512 == 2048
    assert round(concurrency(91_495, groups, 8192, BATCHED), 2) == 44.68
    # a shorter context: the chunk is capped by it too (1,024 tokens: 64 blocks in every group)
    assert sequence_blocks(groups, 1024, BATCHED) == 4 * 64
    # Gemma 3's windows stay sliding windows, with their extra block
    assert not any(g.chunked for g in catalog_model("gemma-3-27b").spec.attention)


def test_every_logged_pool_matches_the_layout():
    """For every vLLM 0.19 start with a model, the blocks the logged available memory buys (within
    the 0.01 GiB rounding of the print), the printed tokens and the printed concurrency follow
    from the engine's layout: dense, GQA, MLA, sliding, chunked, fp8 caches, TP1 to TP4."""
    from bench.serving import pool_checks

    results = pool_checks()
    assert len(results) >= 39 and set(NEW_ROWS) <= {c.id for c in results}
    assert [c.id for c in results if not c.within_rounding] == []


# google/gemma-3-4b-it's config.json: its text_config names five fields (transformers' Gemma3TextConfig
# defaults fill the rest: 8 heads, 4 key/value heads of 256, 131,072 positions, a 262,208 vocabulary)
GEMMA_3_4B = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "mm_tokens_per_image": 256,
              "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                              "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                              "sliding_window": 1024},
              "torch_dtype": "bfloat16",
              "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                                "model_type": "siglip_vision_model", "num_attention_heads": 16,
                                "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False}}


def test_gemma_3_rotary_tables_as_vllm_builds_them():
    """vLLM's get_rope builds one cos/sin table per distinct rotary embedding. Gemma 3 has two
    (gemma3.py): the sliding layers' (rope_local_base_freq, no scaling: 131,072 rows) and the
    global layers' (rope_theta with linear scaling by 8, which linear_scaling_rope.py extends to
    131,072 x 8 rows); bfloat16, one row of head_dim values. The 27B (head_dim 128) then holds
    (1 + 8) x 131,072 x 128 x 2 = 288 MiB of tables, 256 MiB more than one unscaled table: what
    the weights lacked against vLLM 0.19's "Model loading took 51.45 GiB" (0.32 GiB under)."""
    from calculator.core.gpus import gpu
    from calculator.serving.engines import rotary_positions, rotary_table_bytes
    from calculator.serving.plan import serve

    model = catalog_model("gemma-3-27b")
    assert rotary_positions(model.spec, model.config) == [131_072 * 8, 131_072]
    assert rotary_table_bytes(model.spec, model.config, 2) == 9 * 131_072 * 128 * 2 == 288 * 2**20
    # one table where every layer shares one embedding (Llama 3.1's llama3 scaling keeps its length)
    llama = catalog_model("llama-3.1-8b")
    assert rotary_table_bytes(llama.spec, llama.config, 2) == 131_072 * 128 * 2
    weights = serve(model, gpu("h100"), context=8192, utilization=0.95, engine_version="0.19",
                    layouts=False).replica.weights_bytes_per_gpu
    # the model built on the meta device (27,432,406,640 parameters and its buffers, bfloat16; no
    # vocabulary padding: 262,208 = 4,097 x 64) plus the two tables
    assert model.summary.parameters == 27_432_406_640
    assert weights == model.summary.total_bytes_at("bfloat16") + 288 * 2**20
    assert 51.45 - 0.08 < weights / GIB < 51.45  # 0.07 GiB still under: not found


def test_gemma_3_4b_weights_and_tokens_against_its_vllm_log():
    """The same archive's gemma-3-4b-it start (vLLM 0.19, H100, share 0.95, 8,192 tokens):
    "Model loading took 8.58 GiB", 62.51 GiB available, 468,144 tokens. head_dim 256: tables of
    (1 + 8) x 131,072 x 256 x 2 bytes = 576 MiB, with them the weights within the log's rounding;
    with one unscaled table (64 MiB) they came 0.5 GiB under."""
    from calculator.core.gpus import gpu
    from calculator.models.seam import resolve_config
    from calculator.serving.plan import serve

    row = _row("vllm-0.19.0-h100-11")
    assert row["model"] == "google/gemma-3-4b-it" and row["logged"]["weights_gib"] == 8.58
    model = resolve_config(GEMMA_3_4B, "gemma-3-4b-it")
    plan = serve(model, gpu("h100"), context=8192, utilization=0.95, engine_version="0.19", layouts=False).replica
    tables = 9 * 131_072 * 256 * 2
    assert tables == 576 * 2**20
    assert abs(plan.weights_bytes_per_gpu / GIB - 8.58) < 0.01
    assert (plan.weights_bytes_per_gpu - tables + 64 * 2**20) / GIB < 8.58 - 0.45
    assert abs(plan.kv_tokens / row["logged"]["kv_tokens"] - 1) < 0.005
    assert abs(plan.available_kv_bytes_per_gpu / GIB - row["logged"]["available_kv_gib"]) < 0.15


def test_mistral_small_3_1_rows_compared_with_the_catalog_entry():
    """The archive's two Mistral Small 3.1 starts (vLLM 0.19, H100, share 0.95, 8,192 tokens) now
    compare against the catalog's mistral-small-3.1-24b (the whole Mistral3 model, vision tower
    included, as vLLM loads it). Cache by hand: 40 layers x 2 x 8 key/value heads x 128 x 2 bytes
    = 163,840 bytes a token, a block of 16 tokens 2,621,440 bytes; the base log's 28.19 GiB buy
    11,547 blocks = 184,752 tokens, 22.55x for 8,192 tokens (512 blocks)."""
    from bench.serving import TARGET, compare

    base, w8a8 = _row("vllm-0.19.0-h100-34"), _row("vllm-0.19.0-h100-56")
    assert catalog.find("mistral-small-3.1-24b").id == base["model"]
    assert w8a8["model"] == "RedHatAI/Mistral-Small-3.1-24B-Instruct-2503-quantized.w8a8"
    groups = kv_groups(catalog_model("mistral-small-3.1-24b").spec, 1, 2)
    assert [(g.layers, g.page_bytes) for g in groups] == [(40, 16 * 2 * 8 * 128 * 2)]
    assert groups[0].layers * groups[0].page_bytes == 40 * 65_536 == 2_621_440
    assert pool_blocks(groups, int(28.185 * GIB)) <= 11_547 <= pool_blocks(groups, int(28.195 * GIB))
    assert pool_tokens(groups, 11_547) == 11_547 * 16 == base["logged"]["kv_tokens"]
    assert round(11_547 / 512, 2) == base["logged"]["max_concurrency"]
    plain, quantized = compare(base), compare(w8a8)
    # bfloat16: weights as logged (44.76 GiB), tokens within 0.5%
    assert abs(plain.predicted_weights_gib - 44.76) < 0.01 and abs(plain.error) < 0.005
    # w8a8: within the 0.19 target; the weights 0.41 GiB under, one byte a parameter on the vision
    # tower and projector's 24 x (4 x 1024^2 + 3 x 1024 x 4096) + 1024 x 5120 + 5120^2 + 4096 x 1024
    # = 438.0 million parameters (0.408 GiB) that the checkpoint most likely keeps in bfloat16
    assert abs(quantized.error) <= TARGET
    vision = 24 * (4 * 1024**2 + 3 * 1024 * 4096) + 1024 * 5120 + 5120**2 + 4096 * 1024
    assert abs(24.07 - quantized.predicted_weights_gib - vision / GIB) < 0.01
