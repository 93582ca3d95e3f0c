"""llama.cpp's --n-cpu-moe against -ngl (calculator/distributed/llama_cpp_moe.py), by hand: a small layout
worked out on paper, Mixtral's experts counted from its config, and the command the planner
prints."""

from __future__ import annotations

import json

import pytest

from calculator.core.gpus import gpu
from calculator.distributed.llama_cpp import GgufLayout, gguf_layout, plan_llama_cpp
from calculator.distributed.llama_cpp_moe import fewest_cpu_moe, moe_split
from calculator.models.seam import catalog_model
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints


def paper_layout() -> GgufLayout:
    """4 layers of 100 bytes, 80 of them routed experts of which a token reads 20; the rest of a
    layer (20 bytes) is always read. Output 10, embeddings 5, 3 bytes of cache per layer."""
    return GgufLayout("Q4_K", "Q6_K", "f16", 256, 256, (100,) * 4, (3,) * 4, 5, 10, 7, 6, 0, (40,) * 4,
                      (80,) * 4, (20,) * 4)


def test_the_sides_and_the_time_by_hand():
    side = moe_split(paper_layout(), 2, gpu_gbs=1.0, cpu_gbs=0.1)
    # GPU: every layer and the output, less the experts of layers 0 and 1; the whole cache;
    # the larger compute buffer. CPU: the embeddings and those experts.
    assert (side.gpu_weights_bytes, side.gpu_kv_bytes, side.gpu_compute_bytes) == (400 + 10 - 160, 12, 7)
    assert side.cpu_weights_bytes == 5 + 160
    # a token reads 4 x 40 + 10 + 12 bytes, of which 2 x 20 of experts in CPU memory
    assert side.seconds_per_token == pytest.approx((160 - 40 + 10 + 12) / 1e9 + 40 / 1e8)
    assert moe_split(paper_layout(), 99, 1.0, 0.1).n_cpu_moe == 4


def test_the_fewest_layers_whose_experts_leave_the_gpu():
    layout = paper_layout()
    # N = 0: 410 + 12 + 7 = 429 bytes; N = 1: 349; N = 2: 269
    assert fewest_cpu_moe(layout, 269, 1.0, 0.1).n_cpu_moe == 2
    assert fewest_cpu_moe(layout, 429, 1.0, 0.1).n_cpu_moe == 0
    assert fewest_cpu_moe(layout, 100, 1.0, 0.1) is None  # even every expert on the CPU leaves 109
    dense = catalog_model("llama-3.1-8b")
    assert fewest_cpu_moe(gguf_layout(dense.summary, dense.spec, "Q4_K", 4096), 10**12, 1000, 80) is None


def test_mixtral_experts_counted_from_its_config():
    """Mixtral 8x7B: 32 layers x 8 experts x 3 matrices of 4,096 x 14,336 in Q4_K (144 bytes per
    256 numbers); a token reads 2 of the 8."""
    model = catalog_model("mixtral-8x7b-v0.1")
    layout = gguf_layout(model.summary, model.spec, "Q4_K", 8192)
    experts = 32 * 8 * 3 * 4096 * 14336 * 144 // 256
    assert sum(layout.expert_bytes) == experts
    assert sum(layout.expert_read_bytes) == experts * 2 // 8


def test_the_planner_prints_the_faster_command():
    model = catalog_model("mixtral-8x7b-v0.1")
    plan = plan_llama_cpp(model.summary, model.spec, gpu("rtx4090"), "Q8_0", 8192)
    assert plan.moe is not None and plan.better == "n-cpu-moe"
    assert plan.moe.seconds_per_token < plan.seconds_per_token and plan.moe.gpu_bytes <= plan.limit_bytes
    assert plan.command() == f"llama-server -m model.gguf -ngl 999 --n-cpu-moe {plan.moe.n_cpu_moe} -c 8192"
    assert plan.command(flag="ngl") == f"llama-server -m model.gguf -ngl {plan.ngl} -c 8192"
    data = json.loads(cli("llama-cpp", "mixtral-8x7b-v0.1", "--gpu", "rtx4090", "--type", "Q8_0", "--context",
                          "8192", "--json").stdout)
    assert data["better"] == "n-cpu-moe" and data["command"] == plan.command()
    assert data["n_cpu_moe"]["n_cpu_moe"] == plan.moe.n_cpu_moe
    text = cli("llama-cpp", "mixtral-8x7b-v0.1", "--gpu", "rtx4090", "--type", "Q8_0", "--context", "8192").stdout
    assert "--n-cpu-moe" in text and text.rstrip().endswith(plan.command())
    # everything fits: -ngl puts it all on the GPU, nothing to gain from the experts' flag
    small = plan_llama_cpp(model.summary, model.spec, gpu("h100"), "Q4_K", 8192)
    assert small.all_on_gpu and small.better == "ngl"


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_chapter_quotes_what_the_planner_answers(lang):
    """The cpu-offloading chapter's example (Qwen3-30B-A3B, Q8_0, RTX 4090, -c 8192) is the
    planner's answer, in both languages."""
    from tests.conftest import ROOT

    model = catalog_model("qwen3-30b-a3b")
    plan = plan_llama_cpp(model.summary, model.spec, gpu("rtx4090"), "Q8_0", 8192)
    text = (ROOT / "content" / lang / "cpu-offloading.md").read_text(encoding="utf-8")
    assert plan.better == "n-cpu-moe"
    assert f"`--n-cpu-moe {plan.moe.n_cpu_moe}`" in text and f"`-ngl {plan.ngl}`" in text
    against = {"en": "against", "fr": "contre"}[lang]
    assert f"{plan.moe.tokens_per_second:.0f} tokens/s" in text
    assert f"{against} {plan.tokens_per_second:.0f}" in text
