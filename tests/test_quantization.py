"""Quantization formats: bytes from each block layout worked out by hand, checked against the
gguf package's own table and quantizer, a real bitsandbytes-quantized model on the CPU, and
file sizes published for real checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calculator.models import catalog
from calculator.core.errors import CalculatorError
from calculator.models.meta import count_config
from calculator.memory.quantization import (FORMATS, GGUF_BLOCKS, awq_bytes, bnb_int8_bytes, bnb_nf4_bytes, fp8_bytes,
                                     gguf_bytes, gguf_row_type, gptq_bytes, ladder, quant_format, quantize_model)
from tests.conftest import load_test_config
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

FP16, U8 = 2, 1
# Field by field, the block_q* structs of llama.cpp's ggml/src/ggml-common.h.
HAND_BLOCKS = {
    "Q8_0": (32, FP16 + 32 * U8),  # d; qs[32]
    "Q4_0": (32, FP16 + 16 * U8),  # d; qs[16] (two nibbles a byte)
    "Q4_1": (32, 2 * FP16 + 16),  # d, m; qs[16]
    "Q5_0": (32, FP16 + 4 + 16),  # d; qh[4] (fifth bits); qs[16]
    "Q5_1": (32, 2 * FP16 + 4 + 16),  # d, m; qh[4]; qs[16]
    "IQ4_NL": (32, FP16 + 16),  # d; qs[16]
    "Q2_K": (256, 256 // 16 + 256 // 4 + 2 * FP16),  # scales[16]; qs[64]; d, dmin
    "Q3_K": (256, 256 // 8 + 256 // 4 + 12 + FP16),  # hmask[32]; qs[64]; scales[12]; d
    "Q4_K": (256, 2 * FP16 + 12 + 256 // 2),  # d, dmin; scales[12]; qs[128]
    "Q5_K": (256, 2 * FP16 + 12 + 256 // 8 + 256 // 2),  # d, dmin; scales[12]; qh[32]; qs[128]
    "Q6_K": (256, 256 // 2 + 256 // 4 + 256 // 16 + FP16),  # ql[128]; qh[64]; scales[16]; d
}


@pytest.mark.parametrize("name", sorted(HAND_BLOCKS))
def test_gguf_blocks_match_the_structs_and_the_gguf_package(name):
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    assert GGUF_BLOCKS.get(name, HAND_BLOCKS[name]) == HAND_BLOCKS[name]
    assert GGML_QUANT_SIZES[getattr(GGMLQuantizationType, name)] == HAND_BLOCKS[name]


def test_q4_0_is_18_bytes_per_32_weights():
    assert gguf_bytes("Q4_0", 4096, 4096) == 4096 * 4096 // 32 * 18
    assert gguf_bytes("Q8_0", 10, 64) == 10 * 2 * 34


@pytest.mark.parametrize("name", ["Q4_0", "Q8_0", "Q5_0", "Q5_1", "Q4_1"])
def test_gguf_bytes_equal_a_real_quantized_matrix(name):
    """The gguf package quantizes these types with numpy: the packed array's size is ours."""
    import torch
    from gguf import GGMLQuantizationType, quants

    from tests.test_real_models import build_real

    model = build_real(load_test_config("tiny-llama"), "auto", torch.float32)
    weight = model.model.layers[0].self_attn.q_proj.weight.detach().numpy()  # 64 rows of 64
    packed = quants.quantize(weight.astype(np.float32), getattr(GGMLQuantizationType, name))
    if name in GGUF_BLOCKS:
        assert packed.nbytes == gguf_bytes(name, weight.shape[0], weight.shape[1])
    assert packed.nbytes == weight.shape[0] * weight.shape[1] // 32 * HAND_BLOCKS[name][1]


def test_k_quant_rows_fall_back_as_llama_cpp_does():
    assert gguf_row_type("Q4_K", 896) == "Q5_0"  # 896 = 3.5 x 256, a multiple of 32
    assert gguf_row_type("Q6_K", 896) == "Q8_0"
    assert gguf_row_type("Q5_K", 896) == "Q5_1"
    assert gguf_row_type("Q2_K", 896) == "IQ4_NL"
    assert gguf_row_type("Q4_K", 4096) == "Q4_K"
    assert gguf_row_type("Q4_0", 100) == "F16"  # not even a multiple of 32
    assert gguf_bytes("Q4_K", 2, 896) == 2 * 896 // 32 * 22


def test_bitsandbytes_layouts_by_hand():
    n = 4096 * 4096
    blocks = n // 64
    assert bnb_nf4_bytes(n, double_quant=False) == n // 2 + 4 * blocks + 64
    # QLoRA: 8-bit absmax per block, float32 per 256 blocks, float32 offset, 256-entry code
    assert bnb_nf4_bytes(n, double_quant=True) == n // 2 + blocks + 4 * (blocks // 256) + 4 + 64 + 1024
    assert 8 * (bnb_nf4_bytes(n, True) - 64 - 1024 - 4) / n == pytest.approx(4 + 8 / 64 + 32 / (64 * 256))
    assert bnb_int8_bytes(4096, 11008) == 4096 * 11008 + 4 * 11008


def test_gptq_and_awq_packing_by_hand():
    # 4096 x 4096, groups of 128: int32 words of 8 weights, fp16 scales, packed 4-bit zeros
    qweight, groups = 4096 // 8 * 4096 * 4, 4096 // 128
    assert gptq_bytes(4096, 4096, 128) == qweight + groups * 4096 // 8 * 4 + groups * 4096 * 2 + 4096 * 4
    assert awq_bytes(4096, 4096, 128) == qweight + groups * 4096 // 8 * 4 + groups * 4096 * 2
    assert gptq_bytes(4096, 4096, 32) > gptq_bytes(4096, 4096, 128)


def test_float8_scales_by_hand():
    import torch

    assert torch.empty(0, dtype=torch.float8_e4m3fn).element_size() == 1
    assert fp8_bytes(7168, 18432, None) == 7168 * 18432 + 4
    assert fp8_bytes(7168, 18432, 128) == 7168 * 18432 + 4 * 56 * 144


def _real_bytes(model) -> int:
    """Every tensor the quantized model holds, each storage once: parameters, buffers and the
    bitsandbytes quantization state (absmax, nested absmax, codes, offsets)."""
    import torch

    seen, total = set(), 0

    def add(tensor):
        nonlocal total
        if isinstance(tensor, torch.Tensor) and tensor.untyped_storage().data_ptr() not in seen:
            seen.add(tensor.untyped_storage().data_ptr())
            total += tensor.untyped_storage().nbytes()

    for tensor in list(model.parameters()) + list(model.buffers()):
        add(tensor)
        state = getattr(tensor, "quant_state", None)
        if state is not None:
            for value in (state.absmax, state.code, state.offset):
                add(value)
            if state.state2 is not None:
                add(state.state2.absmax)
                add(state.state2.code)
        add(getattr(tensor, "SCB", None))
    return total


@pytest.mark.parametrize("fmt", ["bnb-nf4", "bnb-nf4-dq", "bnb-fp4", "bnb-int8"])
@pytest.mark.parametrize("config_name", ["tiny-llama", "tiny-mixtral"])
def test_bitsandbytes_bytes_equal_a_real_quantized_model(fmt, config_name, tmp_path):
    """transformers + bitsandbytes 0.50 quantize a real model on the CPU; every byte it holds
    is what quantize_model computes from the meta-device summary (experts stay in 16 bits)."""
    import torch
    import transformers
    from transformers import BitsAndBytesConfig

    from tests.test_real_models import build_real

    config = load_test_config(config_name)
    build_real(config, "auto", torch.bfloat16).save_pretrained(tmp_path)
    options = {"bnb-nf4": dict(load_in_4bit=True, bnb_4bit_quant_type="nf4"),
               "bnb-nf4-dq": dict(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True),
               "bnb-fp4": dict(load_in_4bit=True, bnb_4bit_quant_type="fp4"),
               "bnb-int8": dict(load_in_8bit=True)}[fmt]
    cls = getattr(transformers, config["architectures"][0])
    model = cls.from_pretrained(tmp_path, quantization_config=BitsAndBytesConfig(**options), device_map="cpu",
                                dtype=torch.bfloat16)
    summary = count_config(config)
    spec = __import__("calculator.models.meta", fromlist=["count"]).count(config)[1]
    assert _real_bytes(model) == quantize_model(summary, spec, fmt).total_bytes


# Published file sizes (GB = 10^9 bytes, as the model cards print them, two decimals; the
# files also hold a small header, hence a tolerance of 0.01 GB).
PUBLISHED = [
    # TheBloke's model cards, "Provided files": main branch, 4 bits, group size 128
    ("llama-2-7b", "gptq-4bit", 3.90), ("llama-2-13b", "gptq-4bit", 7.26), ("llama-2-7b", "awq-4bit", 3.89),
    # localmodels/Llama-2-13B-ggml: q4_K_S "uses GGML_TYPE_Q4_K for all tensors"
    ("llama-2-13b", "Q4_K", 7.37),
]


@pytest.mark.parametrize("key,fmt,gigabytes", PUBLISHED)
def test_totals_match_published_checkpoint_sizes(key, fmt, gigabytes):
    result = quantize_model(catalog.stored_summary(key), catalog.stored_spec(key), fmt)
    assert result.total_bytes / 1e9 == pytest.approx(gigabytes, abs=0.01)


def test_modules_kept_in_16_bits():
    summary, spec = catalog.stored_summary("llama-3-8b"), catalog.stored_spec("llama-3-8b")
    nf4 = quantize_model(summary, spec, "bnb-nf4")
    g = summary.groups
    assert nf4.kept_parameters == g["embedding"] + g["head"] + g["norm"] + g["bias"] + g["other"]
    assert nf4.kept_bytes == 2 * nf4.kept_parameters
    assert nf4.buffers_bytes == summary.buffer_bytes_at("bfloat16")
    gguf = quantize_model(summary, spec, "Q4_0")
    assert gguf.kept_parameters == g["norm"] + g["bias"] + g["other"]  # GGUF quantizes embeddings and head
    assert gguf.kept_bytes == 4 * (g["norm"] + g["bias"])


def test_routers_and_experts():
    summary, spec = catalog.stored_summary("mixtral-8x7b-v0.1"), catalog.stored_spec("mixtral-8x7b-v0.1")
    router = 32 * 4096 * 8
    gptq = quantize_model(summary, spec, "gptq-4bit")
    nf4 = quantize_model(summary, spec, "bnb-nf4")
    assert gptq.kept_parameters == summary.groups["embedding"] + summary.groups["head"] + summary.groups["norm"] + router
    assert nf4.kept_parameters == gptq.kept_parameters + summary.groups["experts"]
    assert gptq.total_bytes < nf4.total_bytes / 3


def test_the_ladder_divides_by_eight():
    steps = dict((d, (b, f)) for d, b, f in ladder(catalog.stored_summary("llama-2-7b")))
    assert steps["int4"][1] == pytest.approx(8, rel=1e-6)  # buffers aside: 512 bytes of rotary frequencies
    assert steps["bfloat16"][0] == 6_738_415_616 * 2 + 512


def test_bad_format_and_group_size():
    summary, spec = catalog.stored_summary("gpt2"), catalog.stored_spec("gpt2")
    with pytest.raises(CalculatorError):
        quant_format("Q9_9")
    with pytest.raises(CalculatorError):
        quantize_model(summary, spec, "gptq-4bit", group_size=100)
    assert len({f.key for f in FORMATS}) == len(FORMATS)


def test_quantize_cli():
    data = json.loads(cli("quantize", "llama-2-7b", "--gpu", "t4", "--formats", "bnb-nf4", "Q4_0", "--json").stdout)
    assert [r["format"] for r in data["rows"]] == ["bnb-nf4", "Q4_0"]
    assert all(isinstance(r["total_bytes"], int) and r["fits"] for r in data["rows"])
    table = cli("quantize", "gpt2").stdout
    assert "GiB" in table and "Q6_K" in table and "bits/param" in table
    bad = cli("quantize", "gpt2", "--group-size", "100")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
