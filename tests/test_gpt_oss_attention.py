"""gpt-oss's attention in transformers 5.24: no SDPA path, eager attention with a learned
sink logit per head by default, and the fused kernels its class vouches for. The engine prices
the kernel ("flash") when a fused kernel is asked for, and eager otherwise; both are compared
with the live bytes of the real module on the CPU, inside the last layer's attention."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import transformers

from bench.measure import LiveBytes, dummy_inputs, run_inference
from calculator.memory.activations import forward_phases
from calculator.memory.inference import inference_memory
from calculator.models import catalog
from calculator.models.architecture import attention_run, spec_from_config
from calculator.models.meta import make_config

KERNEL = "kernels-community/vllm-flash-attn3"


def tiny_gpt_oss() -> dict:
    config = {k: v for k, v in catalog.config("gpt-oss-20b").items() if k != "quantization_config"}
    config.update(hidden_size=128, intermediate_size=128, num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                  num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"], num_local_experts=4,
                  vocab_size=500, sliding_window=128, pad_token_id=0, eos_token_id=1)
    return config


def test_transformers_runs_eager_unless_a_sink_kernel_is_named():
    model_class = transformers.GptOssForCausalLM
    assert model_class._supports_sdpa is False and model_class._supports_flash_attn is True
    assert model_class._compatible_flash_implementations[0] == KERNEL
    cfg = make_config(tiny_gpt_oss())
    model = model_class._from_config(cfg)
    assert model.config._attn_implementation == "eager"  # what from_pretrained gives without attn_implementation
    with pytest.raises(ValueError):
        model_class._from_config(cfg, attn_implementation="sdpa")
    spec = catalog.stored_spec("gpt-oss-20b")
    assert spec.flash_kernel == KERNEL and not spec.sdpa
    assert attention_run(spec, "sdpa") == "flash" and attention_run(spec, "eager") == "eager"
    assert attention_run(catalog.stored_spec("llama-3.1-8b"), "sdpa") == "sdpa"


def _fused_kernel(module, query, key, value, attention_mask, scaling=None, **kwargs):
    """What a FlashAttention kernel holds (no scores, keys and values read per key/value head):
    the CPU's fused SDPA kernel, causal, without the sinks (one logit per head: no memory)."""
    out = F.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2), None


def live_while_running(model, module, tokens: int) -> tuple[int, int]:
    """(live bytes when `module` starts, peak live bytes until it returns), in the prefill of
    generate on 2 sequences of `tokens`: what one module holds inside the whole model."""
    ids, mask = dummy_inputs(model, 2, tokens)
    tracker, seen = LiveBytes(), {}

    def start(*_):
        tracker.peak = seen["start"] = tracker.current

    def end(*_):  # returns None: the module's output stays its own
        seen["peak"] = tracker.peak

    hooks = (module.register_forward_pre_hook(start), module.register_forward_hook(end))
    with tracker:
        run_inference(model, ids, mask, "generate")
    for hook in hooks:
        hook.remove()
    return seen["start"], seen["peak"]


def _attention_peak(model, tokens: int) -> int:
    """Peak live bytes while the last layer's attention runs, in the prefill of generate."""
    return live_while_running(model, model.model.layers[-1].self_attn, tokens)[1]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("implementation,requested", [("fused", "sdpa"), ("eager", "eager")])
def test_attention_moment_equals_live_bytes_of_the_real_module(implementation, requested, dtype):
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register("fused", _fused_kernel)
    AttentionMaskInterface.register("fused", flash_attention_mask)  # as for flash kernels: no mask built
    cfg = make_config(tiny_gpt_oss())
    spec = spec_from_config(cfg)
    torch.manual_seed(0)
    model = transformers.GptOssForCausalLM._from_config(cfg, dtype=getattr(torch, dtype),
                                                       attn_implementation=implementation).eval()
    a = 4 if dtype == "float32" else 2
    for tokens in (40, 200):
        phases = {p.name: p.total_bytes for p in forward_phases(spec, 2, tokens, a, a, requested, "generate")}
        assert phases["attention"] == pytest.approx(_attention_peak(model, tokens), rel=0.02)


def test_gpt_oss_20b_at_131k_tokens_by_path():
    summary, spec = catalog.stored_summary("gpt-oss-20b"), catalog.stored_spec("gpt-oss-20b")
    fused = inference_memory(summary, spec, 1, 131_072)
    eager = inference_memory(summary, spec, 1, 131_072, attention="eager")
    assert (fused.attention_used, fused.attn_implementation) == ("flash", KERNEL)
    assert (eager.attention_used, eager.attn_implementation) == ("eager", "eager")
    # eager's scores alone, by hand: one full layer's 64 heads x 131,072^2 at 2 bytes, three times
    # (masked scores, logits with the sink column, softmax): far beyond any card
    scores = 3 * 64 * 131_072 ** 2 * 2  # exactly 6 TiB: the chapter's "about 6 TiB"
    assert scores == 6 * 2**40 and scores < eager.activation_peak_bytes < 1.05 * scores
    assert fused.activation_peak_bytes < eager.activation_peak_bytes / 100


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_oom_page_says_which_attention_to_pass(lang):
    from tests.apptest import open_page
    from tests.test_oom_chapter import alerts

    fused = alerts(open_page("oom", lang, cm_model="openai/gpt-oss-20b", cm_attention="sdpa", cm_dtype="bfloat16",
                             cm_batch="1", cm_gpu="NVIDIA A100 80GB SXM"))
    assert f'attn_implementation="{KERNEL}"' in fused
    eager = alerts(open_page("oom", lang, cm_model="openai/gpt-oss-20b", cm_attention="eager", cm_dtype="bfloat16",
                             cm_batch="1", cm_gpu="NVIDIA A100 80GB SXM"))
    assert KERNEL not in eager
