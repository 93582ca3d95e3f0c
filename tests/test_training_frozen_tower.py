"""Full fine-tuning of a vision-language model on a text batch: the image side (tower and
projector) gets no gradient, so it holds no gradients and no optimizer states; checked on a
real tiny Gemma 3 on the CPU, against the text model alone built from the published config,
and on the page in both languages. LoRA: peft 0.21's "all-linear" does wrap the tower's
matrices (checked on the real model), so the adapter count keeps them, but not Gemma 3's
projector weight, a bare parameter rather than an nn.Linear."""

from __future__ import annotations

import pytest

from calculator.models.architecture import spec_from_config
from calculator.models.meta import count_config, make_config
from calculator.models.seam import catalog_model
from calculator.training import TrainingSetup, lora_parameters, training_memory
from calculator.training.peak import tower_parameters
from tests.apptest import open_page
from tests.test_parity import cli_json
from tests.test_training_towers import _real, tiny_gemma3


def _text_backward(model):
    import torch

    ids = torch.randint(0, 512, (2, 16))
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()
    with_grad = sum(p.numel() for p in model.parameters() if p.grad is not None)
    without = sum(p.numel() for p in model.parameters() if p.grad is None)
    return with_grad, without


def test_a_text_batch_trains_the_language_model_alone():
    config = tiny_gemma3()
    with_grad, without = _text_backward(_real(config))
    summary, spec = count_config(config), spec_from_config(make_config(config))
    setup = TrainingSetup(method="full", precision="float32", micro_batch=2, sequence=16, device="cpu",
                          checkpointing="none")
    memory = training_memory(summary, spec, setup)
    assert without > 0 and tower_parameters(summary, spec) == without
    assert memory.trainable_parameters == with_grad
    assert memory.gradients_bytes == 4 * with_grad  # float32 gradients for what a text batch reaches


def test_gemma_3_27b_trains_its_text_model():
    """The trained parameters are those of Gemma 3 27B's text model built alone from the
    published text_config; the weights still hold the tower."""
    model = catalog_model("gemma-3-27b")
    text = {**model.config["text_config"], "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text"}
    alone = count_config(text).parameters
    data = cli_json("train", "gemma-3-27b", "--method", "full")
    assert data["trainable_parameters"] == alone < data["parameters"]
    assert data["frozen_tower_parameters"] == data["parameters"] - alone
    plain = cli_json("train", "llama-3.1-8b", "--method", "full")
    assert plain["frozen_tower_parameters"] == 0 and plain["trainable_parameters"] == plain["parameters"]


def test_peft_all_linear_wraps_the_towers_matrices():
    """peft's "all-linear" on Gemma 3 adapts the SigLIP tower's q/k/v/out_proj and fc1/fc2
    too: the engine's adapter count, tower included, is peft's."""
    from peft import LoraConfig, get_peft_model

    config = tiny_gemma3()
    model = get_peft_model(_real(config), LoraConfig(r=8, target_modules="all-linear"))
    wrapped = [n for n, _ in model.named_modules() if n.endswith("lora_A")]
    assert any("vision_tower" in n for n in wrapped)
    adapters = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    assert lora_parameters(count_config(config), 8) == adapters


@pytest.mark.parametrize("lang,words", [("en", "priced frozen"), ("fr", "chiffrée gelée")])
def test_the_page_says_the_tower_is_frozen(lang, words):
    at = open_page("fine-tuning", lang, model="gemma-3-27b", method="full", gpu="h100")
    assert not at.exception, [e.value for e in at.exception]
    assert any(words in info.value for info in at.info), [i.value for i in at.info]
    plain = open_page("fine-tuning", lang, model="llama-3.1-8b", method="full", gpu="h100")
    assert not any(words in info.value for info in plain.info)


def test_the_idle_adapters_are_those_peft_puts_on_the_tower():
    """The tower's share of peft's adapters on a real tiny Gemma 3 (both target spellings), and
    `train --json` prints the count for Gemma 3 27B (none for a text model, none for full)."""
    from peft import LoraConfig, get_peft_model

    from calculator.models.summary import in_tower
    from calculator.training import idle_adapter_parameters

    config = tiny_gemma3()
    summary, spec = count_config(config), spec_from_config(make_config(config))
    for targets in ("all-linear", "q_proj,v_proj"):
        model = get_peft_model(_real(config), LoraConfig(r=8, target_modules=targets if "," not in targets
                                                         else targets.split(",")))
        tower = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n and in_tower(n))
        setup = TrainingSetup(method="lora", lora_rank=8, lora_targets=targets)
        assert tower > 0 and idle_adapter_parameters(summary, spec, setup) == tower
    data = cli_json("train", "gemma-3-27b", "--method", "lora")
    gemma = catalog_model("gemma-3-27b")
    assert data["idle_adapter_parameters"] == idle_adapter_parameters(gemma.summary, gemma.spec,
                                                                      TrainingSetup(method="lora", lora_rank=16)) > 0
    assert cli_json("train", "llama-3.1-8b", "--method", "lora")["idle_adapter_parameters"] == 0
    assert cli_json("train", "gemma-3-27b", "--method", "full")["idle_adapter_parameters"] == 0


@pytest.mark.parametrize("lang,words", [("en", "peft also puts adapters"), ("fr", "peft pose aussi des adaptateurs")])
def test_the_page_says_the_towers_adapters_get_no_gradient(lang, words):
    at = open_page("fine-tuning", lang, model="gemma-3-27b", method="lora", gpu="h100")
    assert not at.exception, [e.value for e in at.exception]
    notes = [info.value for info in at.info if words in info.value]
    assert notes and "ddp_find_unused_parameters=True" in notes[0] and r".*language_model.*\.(q_proj|v_proj)" in notes[0]
    plain = open_page("fine-tuning", lang, model="llama-3.1-8b", method="lora", gpu="h100")
    assert not any(words in info.value for info in plain.info)
