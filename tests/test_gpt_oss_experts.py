"""gpt-oss's experts in transformers 5.24 (integrations/moe.py, grouped_mm with has_bias=True,
and GptOssExperts._apply_gate): beside the routed inputs, the gate/up biases gathered per
routed copy and the up projection (S x 2I each), then the clamped gate and up, the sigmoid's
product, up + 1 and their product (S x I each). The engine priced the generic act(gate) * up
path (S x (h + 4I)), half of what the real module holds; both compared here with the live
bytes of the real module on the CPU, with I different from h and k below the experts."""

from __future__ import annotations

import pytest
import torch
import transformers

from bench.measure import measure_inference
from calculator.memory.activations import forward_phases
from calculator.memory.inference import peak_phase
from calculator.models.architecture import spec_from_config
from calculator.models.meta import make_config
from tests.test_gpt_oss_attention import live_while_running, tiny_gpt_oss


def _experts_live(model, tokens: int) -> int:
    """Live bytes the last layer's experts add while they run, in the prefill of generate."""
    start, peak = live_while_running(model, model.model.layers[-1].mlp.experts, tokens)
    return peak - start


def _model(intermediate: int, top_k: int, dtype: str):
    config = {**tiny_gpt_oss(), "intermediate_size": intermediate, "num_experts_per_tok": top_k}
    cfg = make_config(config)
    torch.manual_seed(0)
    return spec_from_config(cfg), transformers.GptOssForCausalLM._from_config(cfg, dtype=getattr(torch, dtype)).eval()


@pytest.mark.parametrize("intermediate,top_k,dtype", [(64, 2, "float32"), (256, 4, "float32"), (256, 2, "bfloat16")])
def test_the_experts_moment_equals_live_bytes_of_the_real_module(intermediate, top_k, dtype):
    """Within 1%: the engine's figure also holds the router's logits, made before the experts run."""
    spec, model = _model(intermediate, top_k, dtype)
    a = 4 if dtype == "float32" else 2
    for tokens in (40, 300):
        phase = next(p for p in forward_phases(spec, 2, tokens, a, a, "eager", "generate") if p.name == "experts")
        priced = dict(phase.parts)["experts"]
        assert priced == pytest.approx(_experts_live(model, tokens), rel=0.01)


def test_the_experts_by_hand():
    """S = 2 x 300 tokens x 4 experts each = 2,400 routed copies, h = 128, I = 256, float32:
    S x (h + 9I) x 4 bytes, plus the router's logits and the routing bookkeeping."""
    spec, _ = _model(256, 4, "float32")
    phase = next(p for p in forward_phases(spec, 2, 300, 4, 4, "eager", "generate") if p.name == "experts")
    s = 2 * 300 * 4
    assert dict(phase.parts)["experts"] == s * (128 + 9 * 256) * 4 + 600 * 4 * 4 + s * (4 + 8 + 16 + 4 + 4)


def test_the_whole_prefill_peak_of_a_real_run():
    spec, model = _model(256, 4, "float32")
    peak, cache = measure_inference(model, 2, 300, "generate")
    predicted = peak_phase(spec, 2, 300, "float32", "eager", "generate").total_bytes
    assert predicted - cache == pytest.approx(peak - cache, rel=0.02)
