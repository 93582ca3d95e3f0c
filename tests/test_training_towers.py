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
    # LoRA on every linear (the tower's too, as peft does): the tower's adapters keep nothing either
    setup = TrainingSetup(method="lora", precision="bf16-autocast", micro_batch=2, sequence=64, device="cpu",
                          checkpointing="none")
    assert engine(config) == engine(text)


@pytest.mark.parametrize("targets", ["all-linear", "q_proj,k_proj,v_proj,o_proj"])
def test_lora_on_a_vision_language_model_trains_no_adapter_in_the_tower(targets):
    """peft (installed version) adapts the tower's matching layers too, but a text batch never
    reaches them: on a real tiny Gemma 3 on the CPU their .grad stays None after the backward
    and AdamW keeps no state for them. The engine counts them as peft does (trainable), keeps
    their weights, and gives them no gradient and no optimizer state."""
    import torch
    from peft import LoraConfig, get_peft_model

    from calculator.models.summary import in_tower

    config, rank = tiny_gemma3(), 4
    model = get_peft_model(_real(config), LoraConfig(r=rank, target_modules=targets.split(",") if "," in targets
                                                     else targets))
    ids = torch.randint(0, 400, (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    optimizer.step()
    adapters = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    with_grad = sum(p.numel() for _, p in adapters if p.grad is not None)
    with_state = sum(p.numel() for _, p in adapters if p in optimizer.state)
    tower = sum(p.numel() for n, p in adapters if in_tower(n))
    assert tower > 0 and with_grad == with_state == sum(p.numel() for _, p in adapters) - tower

    summary, spec = count_config(config), spec_from_config(make_config(config))
    real_linears = {(name, m.in_features, m.out_features, in_tower(name)) for name, m in _real(config).named_modules()
                    if isinstance(m, torch.nn.Linear) and name != "lm_head"}
    assert {(n.split(".")[-1], i, o, t) for n, i, o, t in real_linears} == \
        {(m.name, m.in_features, m.out_features, m.tower) for m in summary.linears if m.kind == "linear"} - \
        {("multi_modal_projector", 64, 32, True)}  # Gemma 3's projector is a bare matrix, not an nn.Linear
    setup = TrainingSetup(method="lora", precision="float32", device="cpu", lora_rank=rank, lora_targets=targets,
                          micro_batch=2, sequence=16, checkpointing="none")
    memory = training_memory(summary, spec, setup, traits=traits_from_config(config))
    assert memory.trainable_parameters == sum(p.numel() for _, p in adapters)  # peft's count
    assert memory.gradients_bytes == 4 * with_grad
    assert memory.optimizer_bytes == 2 * 4 * with_state
