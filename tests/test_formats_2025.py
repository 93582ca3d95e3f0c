"""Today's formats: MXFP4, NVFP4, torchao's int8 / int4 weight-only, what each converts, the
bytes of each worked out by hand for one matrix, gpt-oss priced as it ships, and the format a
checkpoint ships in read from its config."""

from __future__ import annotations

import json

import pytest

from calculator.models import catalog
from calculator.memory.inference import inference_memory
from calculator.memory.quantization import (
    FORMAT_KEYS, matrix_bytes, quant_format, quantize_model, shipped_format,
)
from tests.cli_runner import run_cli

GiB = 2**30


def test_the_new_format_keys_are_named_with_the_others():
    assert {"mxfp4", "nvfp4", "torchao-int8", "torchao-int4", "fp8-block128"} <= set(FORMAT_KEYS)


@pytest.mark.parametrize("key,expected", [
    # 4,096 x 4,096 weights, by hand:
    # MXFP4: 4,096 rows x 128 blocks of 32, each 16 bytes of E2M1 pairs + 1 E8M0 scale byte.
    ("mxfp4", 4096 * 128 * (16 + 1)),
    # NVFP4: 4,096 rows x 256 blocks of 16, each 8 bytes + 1 FP8 E4M3 scale; one float32 per tensor.
    ("nvfp4", 4096 * 256 * (8 + 1) + 4),
    # torchao Int8Tensor: 1 byte per weight; per row a bfloat16 scale and an int8 zero point.
    ("torchao-int8", 4096 * 4096 + 4096 * (2 + 1)),
    # torchao Int4Tensor: half a byte per weight; per row and group of 128 a bfloat16 scale and zero.
    ("torchao-int4", 4096 * 4096 // 2 + 4096 * (4096 // 128) * (2 + 2)),
    # DeepSeek-V3's float8: 1 byte per weight, a float32 scale per 128 x 128 block (32 x 32 blocks).
    ("fp8-block128", 4096 * 4096 + 32 * 32 * 4),
])
def test_bytes_of_one_matrix_by_hand(key, expected):
    assert matrix_bytes(quant_format(key), 4096, 4096) == expected


def test_bits_per_weight_with_their_scales():
    # MXFP4 4.25 bits (4 + 8/32), NVFP4 4.5 bits (4 + 8/16) before its per-tensor scale.
    assert 8 * matrix_bytes(quant_format("mxfp4"), 4096, 4096) / 4096**2 == 4.25
    assert 8 * (matrix_bytes(quant_format("nvfp4"), 4096, 4096) - 4) / 4096**2 == 4.5


def test_a_row_that_does_not_fill_its_last_block_still_pays_for_it():
    # 40 inputs: two MXFP4 blocks (32 + 8), three NVFP4 blocks (16 + 16 + 8).
    assert matrix_bytes(quant_format("mxfp4"), 40, 1) == 2 * 17
    assert matrix_bytes(quant_format("nvfp4"), 40, 1) == 3 * 9 + 4


def test_mxfp4_values_match_transformers_own_expert_module():
    """transformers' Mxfp4GptOssExperts holds the packed E2M1 values of every expert as uint8,
    two per byte; the scales add one byte per 32 (the checkpoint's *_scales)."""
    import torch
    from transformers import GptOssConfig
    from transformers.integrations.mxfp4 import Mxfp4GptOssExperts

    config = GptOssConfig(hidden_size=256, intermediate_size=192, num_local_experts=4)
    with torch.device("meta"):
        experts = Mxfp4GptOssExperts(config)
    packed = experts.gate_up_proj.numel() + experts.down_proj.numel()
    assert experts.gate_up_proj.dtype == torch.uint8
    scales = 4 * (2 * 192 * 256 // 32 + 256 * 192 // 32)
    ours = 4 * (matrix_bytes(quant_format("mxfp4"), 256, 2 * 192) + matrix_bytes(quant_format("mxfp4"), 192, 256))
    assert ours == packed + scales


def test_gpt_oss_as_shipped_matches_the_published_checkpoint_sizes():
    # gpt-oss model card (arXiv 2508.10925), table 1, "checkpoint size": 12.8 GiB and 60.8 GiB,
    # experts in MXFP4 and everything else in bfloat16.
    for key, published in (("gpt-oss-20b", 12.8), ("gpt-oss-120b", 60.8)):
        model = quantize_model(catalog.stored_summary(key), catalog.stored_spec(key), "mxfp4")
        assert round(model.total_bytes / GiB, 1) == published, key


def test_mxfp4_on_a_moe_converts_the_experts_alone():
    summary, spec = catalog.stored_summary("gpt-oss-20b"), catalog.stored_spec("gpt-oss-20b")
    model = quantize_model(summary, spec, "mxfp4")
    assert model.quantized_parameters == summary.groups["experts"]
    # A dense model: every linear layer but the head.
    dense = quantize_model(catalog.stored_summary("llama-3-8b"), catalog.stored_spec("llama-3-8b"), "mxfp4")
    assert dense.quantized_parameters == catalog.stored_summary("llama-3-8b").groups["linear"]


def test_torchao_like_bitsandbytes_leaves_fused_experts_alone():
    # transformers' TorchAoHfQuantizer.param_needs_quantization: nn.Linear weights only.
    summary, spec = catalog.stored_summary("qwen3-30b-a3b"), catalog.stored_spec("qwen3-30b-a3b")
    for key in ("torchao-int4", "torchao-int8", "bnb-nf4"):
        model = quantize_model(summary, spec, key)
        assert model.quantized_parameters < summary.parameters - summary.groups["experts"], key
    assert quantize_model(summary, spec, "nvfp4").quantized_parameters > summary.groups["experts"]


@pytest.mark.parametrize("quant,expected", [
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}, "mxfp4"),
    ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}, "fp8-block128"),
    ({"quant_method": "fp8"}, "fp8-tensor"),
    ({"quant_method": "gptq", "bits": 4}, "gptq-4bit"),
    ({"quant_method": "awq", "bits": 4}, "awq-4bit"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
      "bnb_4bit_use_double_quant": True}, "bnb-nf4-dq"),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "bnb-int8"),
    ({"quant_method": "gptq", "bits": 3}, None),
    # torchao: TorchAoConfig.to_dict's {"default": config_to_dict(config)} (pytorch/Qwen3-8B-INT4's layout)
    ({"quant_method": "torchao", "quant_type": {"default": {"_type": "Int4WeightOnlyConfig", "_version": 2,
                                                            "_data": {"group_size": 128}}}}, "torchao-int4"),
    ({"quant_method": "torchao", "quant_type": {"default": {"_type": "Int4WeightOnlyConfig",
                                                            "_data": {"group_size": 32}}}}, None),
    ({"quant_method": "torchao", "quant_type": {"default": {"_type": "Int8WeightOnlyConfig", "_data": {}}}},
     "torchao-int8"),
    ({"quant_method": "torchao", "quant_type": {"default": {"_type": "Float8DynamicActivationFloat8WeightConfig"}}},
     None),
    ({"quant_method": "torchao", "quant_type": "int4_weight_only"}, None),  # transformers 4's string form
    ("not a table", None),
])
def test_the_shipped_format_is_read_from_the_config(quant, expected):
    assert shipped_format({"model_type": "x", "quantization_config": quant}) == expected
    assert shipped_format({"model_type": "x"}) is None


def test_inference_prices_gpt_oss_in_mxfp4():
    summary, spec = catalog.stored_summary("gpt-oss-20b"), catalog.stored_spec("gpt-oss-20b")
    shipped = inference_memory(summary, spec, batch=1, context=4096, dtype="mxfp4")
    full = inference_memory(summary, spec, batch=1, context=4096, dtype="bfloat16")
    assert shipped.weights_bytes == quantize_model(summary, spec, "mxfp4").total_bytes
    assert full.weights_bytes - shipped.weights_bytes > 25 * GiB


def _cli(*args):
    out = run_cli(*args)  # in this process (tests/cli_runner.py)
    return out.returncode, out.stdout, out.stderr


def test_the_cli_says_what_the_checkpoint_ships_in():
    code, out, _ = _cli("estimate", "gpt-oss-20b", "--json")
    data = json.loads(out)
    assert code == 0 and data["shipped"]["format"] == "mxfp4"
    assert data["shipped"]["total_bytes"] == quantize_model(
        catalog.stored_summary("gpt-oss-20b"), catalog.stored_spec("gpt-oss-20b"), "mxfp4").total_bytes
    code, out, _ = _cli("estimate", "llama-3-8b", "--json")
    assert json.loads(out)["shipped"] is None
    code, out, _ = _cli("quantize", "deepseek-v3", "--formats", "fp8-block128", "nvfp4", "--json")
    assert json.loads(out)["shipped"] == "fp8-block128"
    code, out, _ = _cli("inference", "gpt-oss-20b", "--batch", "1", "--context", "1024", "--dtype", "nvfp4", "--json")
    assert code == 0


def test_a_misspelt_format_is_one_line_and_exit_2():
    code, out, err = _cli("quantize", "gpt2", "--formats", "mxfp3")
    assert code == 2 and "mxfp4" in err and len(err.strip().splitlines()) == 1


def test_every_loader_named_exists_in_the_installed_transformers():
    import transformers

    from calculator.memory.format_support import SUPPORT, support_of

    for key in FORMAT_KEYS:
        name = support_of(key).transformers
        assert not name or isinstance(getattr(transformers, name), type), (key, name)
    assert set(SUPPORT) | {f for f in FORMAT_KEYS if quant_format(f).family == "gguf"} == set(FORMAT_KEYS)


def test_transformers_facts_behind_the_loader_column():
    """The conditions the column states, read in the installed quantizers' source."""
    import inspect

    from transformers.quantizers import quantizer_finegrained_fp8, quantizer_mxfp4, quantizer_nvfp4

    assert "compute_capability >= (7, 5)" in inspect.getsource(quantizer_mxfp4)
    assert "Mxfp4GptOssExperts" in inspect.getsource(quantizer_mxfp4.Mxfp4HfQuantizer.param_needs_quantization)
    assert "pre-quantized NVFP4 checkpoints is not supported" in inspect.getsource(quantizer_nvfp4)
    assert "8.9" in inspect.getsource(quantizer_finegrained_fp8)


def test_the_quantization_page_says_who_loads_each_format_and_what_gpt_oss_ships_in():
    from calculator.core.units import format_bytes
    from tests.apptest import open_page

    shipped = quantize_model(catalog.stored_summary("gpt-oss-20b"), catalog.stored_spec("gpt-oss-20b"), "mxfp4")
    for lang, column, words in (("en", "Who loads it", "ships in mxfp4"), ("fr", "Qui le charge", "publié en mxfp4")):
        at = open_page("quantization", lang, model="gpt-oss-20b")
        assert not at.exception
        table = next(d.value for d in at.dataframe if column in d.value.columns)
        loaders = dict(zip(table.iloc[:, 0], table[column]))
        assert "Mxfp4Config" in loaders["mxfp4"] and "NVFP4Config" in loaders["nvfp4"]
        captions = " ".join(c.value for c in at.caption).replace("\u202f", " ").replace("\xa0", " ")
        assert words in captions and format_bytes(shipped.total_bytes, lang) in captions
