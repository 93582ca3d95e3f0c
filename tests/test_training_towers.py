"""A vision-language model's tower is not part of its language model: training counts the
decoder's layers (Gemma 3 27B: 62, not 62 + the tower's 27), and a text batch keeps no
activations in the tower. Checked against the published configs (hand count) and against
real tiny models built on the CPU with the installed transformers."""

from __future__ import annotations

import pytest

from calculator.models.architecture import spec_from_config
from calculator.models.meta import count_config, make_config
from calculator.models.seam import catalog_model
from calculator.models.families import traits_from_config
from calculator.training import TrainingSetup, training_memory
from calculator.training.peak import _stages, is_language_layer
from tests.test_training import autograd_saved_bytes


@pytest.mark.parametrize("key,language,tower", [
    ("gemma-3-27b", ("text_config", "num_hidden_layers"), ("vision_config", "num_hidden_layers")),
    ("qwen2.5-vl-7b", (None, "num_hidden_layers"), ("vision_config", "depth")),
])
def test_the_layers_training_counts_are_the_language_models(key, language, tower):
    """By hand from the published config.json: Gemma 3 27B has 62 decoder layers and a
    27-layer SigLIP tower; Qwen2.5-VL-7B 28 and a 32-block tower."""
    model = catalog_model(key)
    config = model.config
    text = config[language[0]] if language[0] else config
    stages = _stages(model.summary, model.spec, 1)
    assert stages[0].layers == text[language[1]]
    assert stages[0].parameters == model.summary.parameters  # the tower's weights still count, in front
    assert (text[language[1]], config[tower[0]][tower[1]]) in ((62, 27), (28, 32))
    two = _stages(model.summary, model.spec, 2)
    assert [s.layers for s in two] == [text[language[1]] // 2] * 2


def tiny_gemma3() -> dict:
    """Gemma 3's published layout (text and SigLIP tower) at a size the CPU builds in a moment."""
    return {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "mm_tokens_per_image": 1,
            "image_token_index": 500, "boi_token_index": 501, "eoi_token_index": 502,
            "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
                            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                            "num_hidden_layers": 2, "vocab_size": 512, "sliding_window": 32,
                            "query_pre_attn_scalar": 16},
            "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                              "num_attention_heads": 2, "num_hidden_layers": 3, "image_size": 28,
                              "patch_size": 14, "vision_use_head": False}}


def tiny_qwen25_vl() -> dict:
    return {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
            "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
            "num_hidden_layers": 2, "vocab_size": 512, "rope_scaling": {"mrope_section": [2, 3, 3], "type": "default",
                                                                      "rope_type": "default"},
            "vision_config": {"depth": 3, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                              "out_hidden_size": 64, "patch_size": 14, "spatial_merge_size": 2,
                              "temporal_patch_size": 2, "window_size": 56, "fullatt_block_indexes": [2]}}


def _real(config: dict):
    import torch
    import transformers

    torch.manual_seed(0)
    return getattr(transformers, config["architectures"][0])._from_config(make_config(config), dtype=torch.float32)


@pytest.mark.parametrize("config,language,tower", [(tiny_gemma3(), "language_model.layers", "vision_tower"),
                                                    (tiny_qwen25_vl(), "language_model.layers", "visual")])
def test_a_real_tiny_model_has_the_layers_training_counts(config, language, tower):
    """The model transformers builds on the CPU: its decoder layers are the ones the engine
    counts, and the tower's parameters are the ones it leaves out of them."""
    model = _real(config)
    decoder = model.get_submodule(f"model.{language}")
    tower_params = sum(p.numel() for p in model.get_submodule(f"model.{tower}").parameters())
    layer_params = sum(p.numel() for p in decoder.parameters())
    summary, spec = count_config(config), spec_from_config(make_config(config))
    counted = [u for u in summary.units if is_language_layer(u.name, spec)]
    assert len(counted) == len(decoder) == 2
    assert sum(u.parameters for u in counted) == layer_params
    assert sum(p.numel() for p in model.parameters()) == summary.parameters
    assert tower_params > 0 and _stages(summary, spec, 1)[0].layers == 2


def test_a_text_batch_keeps_nothing_in_the_tower():
    """Gemma 3 with and without its tower (the same text model): a text batch saves the same
    tensors in both, on the CPU; the engine gives both the same activations (before: the
    tower's 3 layers counted as 3 more decoder layers, 2.5 times as many)."""
    config = tiny_gemma3()
    text = {**config["text_config"], "architectures": ["Gemma3ForCausalLM"]}
    setup = TrainingSetup(precision="float32", micro_batch=2, sequence=64, device="cpu", checkpointing="none")

    def engine(cfg: dict) -> int:
        return training_memory(count_config(cfg), spec_from_config(make_config(cfg)), setup,
                               traits=traits_from_config(cfg)).activations_bytes

    with_tower, alone = autograd_saved_bytes(_real(config), 512, 2, 64), autograd_saved_bytes(_real(text), 512, 2, 64)
    assert with_tower == pytest.approx(alone, rel=0.02)
    assert engine(config) == pytest.approx(engine(text), rel=0.02)
