"""A mixture of experts under bitsandbytes in transformers 5: the fused 3-D expert tensors and
the router are not nn.Linear, so a 4-bit load leaves them in 16 bits, and peft's
prepare_model_for_kbit_training then casts them to float32 with the norms. Checked on a real
model quantized and prepared on the CPU, then priced for Qwen3-30B-A3B."""

from __future__ import annotations

import pytest

from calculator.models import catalog
from calculator.models.meta import count
from calculator.memory.quantization import quantize_model
from calculator.training import TrainingSetup, training_memory
from calculator.training.quantized import quantized_base_bytes, unconverted_expert_parameters
from tests.conftest import load_test_config
from tests.test_quantization import _real_bytes


def test_prepared_qlora_base_holds_the_experts_in_float32(tmp_path):
    import peft
    import torch
    import transformers
    from transformers import BitsAndBytesConfig

    from tests.test_real_models import build_real

    config = load_test_config("tiny-mixtral")
    build_real(config, "auto", torch.bfloat16).save_pretrained(tmp_path)
    quantization = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                      bnb_4bit_compute_dtype=torch.bfloat16)
    model = transformers.MixtralForCausalLM.from_pretrained(tmp_path, quantization_config=quantization,
                                                            device_map="cpu", dtype=torch.bfloat16)
    summary, spec = count(config)
    loaded = quantize_model(summary, spec, "bnb-nf4-dq")
    assert _real_bytes(model) == loaded.total_bytes  # experts and router still in bfloat16

    model = peft.prepare_model_for_kbit_training(model)
    experts = [p for name, p in model.named_parameters() if ".experts." in name]
    assert experts and all(p.dtype == torch.float32 for p in experts)
    # every parameter bitsandbytes left alone doubles: 2 more bytes each
    assert _real_bytes(model) == loaded.total_bytes + 2 * loaded.kept_parameters
    assert loaded.kept_parameters > unconverted_expert_parameters(summary, spec) > 0
    # the training model's frozen base counts the same parameters at 4 bytes
    nf4_matrices = loaded.quantized_parameters
    assert summary.parameters - nf4_matrices == loaded.kept_parameters
    assert quantized_base_bytes(summary, 4, True, spec) > quantized_base_bytes(summary, 2, True, spec)


def test_qwen3_30b_a3b_qlora_base_is_over_a_hundred_gigabytes():
    summary, spec = catalog.stored_summary("qwen3-30b-a3b"), catalog.stored_spec("qwen3-30b-a3b")
    experts = unconverted_expert_parameters(summary, spec)
    # 48 layers x 128 experts x 3 matrices of 2,048 x 768, and 48 routers of 2,048 x 128.
    assert experts == 48 * 128 * 3 * 2048 * 768 + 48 * 2048 * 128
    assert round(4 * experts / 1e9) == 116
    base = quantized_base_bytes(summary, 4, True, spec)
    assert base > 4 * experts
    # without prepare_model_for_kbit_training the experts stay in bfloat16: half as much
    assert quantized_base_bytes(summary, 2, True, spec) < base - 1.9 * experts


def test_the_training_model_prices_the_upcast_experts():
    summary, spec = catalog.stored_summary("qwen3-30b-a3b"), catalog.stored_spec("qwen3-30b-a3b")
    setup = TrainingSetup(method="qlora", precision="bf16-autocast", micro_batch=1, sequence=512, checkpointing="full")
    prepared = training_memory(summary, spec, setup)
    raw = training_memory(summary, spec, TrainingSetup(method="qlora", precision="bf16-autocast", micro_batch=1,
                                                       sequence=512, checkpointing="full", kbit_prepare=False))
    assert prepared.total_bytes > 116e9
    assert prepared.total_bytes - raw.total_bytes == pytest.approx(2 * unconverted_expert_parameters(summary, spec),
                                                                   rel=0.05)


def test_the_lora_calculator_warns_before_the_upcast_in_both_languages():
    from calculator.training import kbit_upcast_bytes
    from calculator.core.units import format_bytes
    from tests.apptest import open_page

    summary, spec = catalog.stored_summary("qwen3-30b-a3b"), catalog.stored_spec("qwen3-30b-a3b")
    upcast = kbit_upcast_bytes(summary, spec, TrainingSetup(method="qlora"))
    en = open_page("fine-tuning", "en", model="qwen3-30b-a3b", gpu="h100", batch="1", sequence="512")
    fr = open_page("fine-tuning", "fr", model="qwen3-30b-a3b", gpu="h100", batch="1", sequence="512")
    assert not en.exception and not fr.exception
    assert any("prepare_model_for_kbit_training" in w.value and format_bytes(upcast, "en") in w.value
               for w in en.warning)
    plain = [w.value.replace("\u202f", " ").replace("\xa0", " ") for w in fr.warning]  # French typography
    assert any("float32 avec les normalisations" in w and format_bytes(upcast, "fr") in w for w in plain), plain
    dense = open_page("fine-tuning", "en", model="llama-3-8b")
    assert not any("prepare_model_for_kbit_training" in w.value for w in dense.warning)
