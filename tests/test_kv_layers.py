"""One description of what a KV cache holds (calculator/memory/kv_layers.py) and llama.cpp's policy on
top of it (calculator/distributed/llama_cpp.py kv_cache), each layer kind worked out by hand from the
models' config.json and llama.cpp's rules (src/llama-kv-cache-iswa.cpp, src/models/*.cpp)."""

from __future__ import annotations

import json

import pytest

from calculator.core.errors import CalculatorError
from calculator.memory.inference import kv_cache_bytes
from calculator.memory.kv_layers import cache_layers
from calculator.distributed.llama_cpp import bytes_per_value, gguf_layout, kv_cache
from calculator.models.seam import catalog_model
from calculator.serving.plan import llamacpp_cache
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

GIB = 2**30


def test_full_attention_layers_by_hand():
    """Llama-3.1-8B: 32 layers, 8 key/value heads of 128: 1,024 keys and 1,024 values per token
    and layer; llama.cpp pads -c 8000 to 8,192 cells, 2 bytes each in f16."""
    spec = catalog_model("llama-3.1-8b").spec
    layers = cache_layers(spec)
    assert len(layers) == 32 and {(x.kind, x.k_values, x.v_values) for x in layers} == {("full", 1024, 1024)}
    assert kv_cache(spec, 8000).layer_bytes == (8192 * 2048 * 2,) * 32
    # q8_0: 34 bytes per 32 numbers
    assert kv_cache(spec, 8192, "q8_0", "q8_0").total_bytes == 32 * 8192 * 2048 // 32 * 34
    assert bytes_per_value("q4_0") == 18 / 32


def test_mistral_window_is_not_used_by_llama_cpp():
    """Mistral-7B-v0.1's config has sliding_window 4096: transformers keeps window - 1 tokens
    per layer, but llama.cpp converts it as `llama`, whose hparams set no sliding window, so
    each of its 32 layers keeps all 32,768 cells: 32 x 32768 x (8 x 128) x 2 x 2 = 4 GiB."""
    spec = catalog_model("mistral-7b-v0.1").spec
    assert {(x.kind, x.window) for x in cache_layers(spec)} == {("sliding", 4096)}
    assert kv_cache(spec, 32768).total_bytes == 4 * GIB
    assert kv_cache_bytes(spec, 1, 32768) == 32 * 4095 * 2048 * 2


def test_sliding_layers_where_llama_cpp_runs_them():
    """Gemma 2 9B: 42 layers alternating sliding (window 4096) and full, 8 heads of 256.
    A sliding layer keeps GGML_PAD(min(n_ctx, 4096 x slots + 512), 256) cells (unified
    cache), or 4096 + 512 per stream with one stream per slot; --swa-full gives it n_ctx."""
    spec = catalog_model("gemma-2-9b").spec
    kinds = [x.kind for x in cache_layers(spec)]
    assert kinds.count("sliding") == kinds.count("full") == 21 and kinds[:4] in (
        ["sliding", "full"] * 2, ["full", "sliding"] * 2)
    row = 8 * 256 * 2 * 2
    assert kv_cache(spec, 32768, slots=1).total_bytes == 21 * (32768 + 4608) * row
    assert kv_cache(spec, 32768).total_bytes == 21 * (32768 + 16896) * row  # 4 slots: 4 x 4096 + 512
    assert kv_cache(spec, 8192).total_bytes == 42 * 8192 * row  # the window is wider than the context
    assert kv_cache(spec, 32768, swa_full=True).total_bytes == 42 * 32768 * row
    # no unified cache: 4 streams of 8,192 cells; a sliding layer 4 x pad(4096 + 512) = 4 x 4608
    split = kv_cache(spec, 32768, slots=4, unified=False)
    assert (split.n_ctx, split.tokens_per_slot) == (32768, 8192)
    assert split.total_bytes == 21 * (32768 + 4 * 4608) * row


def test_mla_keeps_the_latent_once():
    """DeepSeek-V2-Lite: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 numbers per token and
    layer, in K only (llama.cpp reads V from the latent), 27 layers."""
    spec = catalog_model("deepseek-v2-lite").spec
    layers = cache_layers(spec)
    assert len(layers) == 27 and {(x.kind, x.k_values, x.v_values) for x in layers} == {("mla", 576, 0)}
    assert kv_cache(spec, 4096).total_bytes == 27 * 4096 * 576 * 2
    assert kv_cache(spec, 4096, "q8_0", "q8_0").total_bytes == 27 * 4096 * 576 // 32 * 34


def test_one_llama_cpp_model_everywhere():
    """The cpu-offloading chapter's planner, the serving chapter's buffer and `serve --engine
    llama.cpp` give the same cache for the same -c."""
    model = catalog_model("mistral-7b-v0.1")
    layout = gguf_layout(model.summary, model.spec, "Q4_K", 32768)
    assert sum(layout.kv_bytes) == llamacpp_cache(model.spec, 32768).total_bytes == 4 * GIB
    data = json.loads(cli("serve", "mistral-7b-v0.1", "--gpu", "rtx4090", "--engine", "llama.cpp",
                          "--context", "32768", "--json").stdout)
    planner = json.loads(cli("llama-cpp", "mistral-7b-v0.1", "--context", "32768", "--json").stdout)
    assert data["kv_cache_bytes"] == planner["gpu_kv_bytes"] + planner["cpu_kv_bytes"] == 4 * GIB
    assert data["command"] == "llama-server -m model.gguf -c 32768 -np 4 -ngl 999 -kvu"
    half = llamacpp_cache(model.spec, 32768, gpu_layers=17)
    assert (half.gpu_bytes, half.host_bytes) == (2 * GIB, 2 * GIB)


def test_bad_llama_cpp_inputs():
    spec = catalog_model("llama-3.1-8b").spec
    for kwargs in ({"slots": 0}, {"slots": 257}, {"cache_type_k": "q3_k"}, {"context": 0}):
        with pytest.raises(CalculatorError):
            kv_cache(spec, **{"context": 4096, **kwargs})
    bad = cli("serve", "llama-3.1-8b", "--gpu", "h100", "--engine", "llama.cpp", "--slots", "0")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1
    bert = cli("serve", "bert-base-cased", "--gpu", "h100", "--engine", "llama.cpp")
    assert bert.returncode == 2 and bert.stderr.count("\n") == 1


TINY_NEXT = {"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], "hidden_size": 256,
             "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
             "head_dim": 64, "vocab_size": 1000, "max_position_embeddings": 4096,
             "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
             "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 32,
             "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2,
             "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128, "decoder_sparse_step": 1,
             "full_attention_interval": 4}


@pytest.fixture(scope="module")
def tiny_next():
    from calculator.models.seam import resolve_config

    return resolve_config(dict(TINY_NEXT), "tiny-qwen3-next")


def test_linear_attention_layers_from_the_config(tiny_next, tmp_path):
    """A Qwen3-Next-shaped model, 3 gated-DeltaNet layers then 1 full-attention layer.
    Linear layer: convolution over 2 x 2 x 32 + 4 x 32 = 256 channels, 4 wide; recurrent state
    4 value heads x 32 x 32 = 4,096 numbers. llama.cpp keeps, per slot and in float32, the
    window less one column and the state: 4 slots x 4 B x (3 x 256 + 4,096) = 77,824 bytes per
    layer, whatever the context; the full layer 4,096 cells x 2 heads x 64 x 2 (K, V) x 2 B."""
    spec, config = tiny_next.spec, tiny_next.config
    layers = cache_layers(spec, config)
    assert [x.kind for x in layers] == ["linear", "linear", "linear", "full"]
    assert (layers[0].conv_channels, layers[0].conv_kernel, layers[0].state_values) == (256, 4, 4096)
    assert [x.kind for x in cache_layers(spec)] == ["full"] * 4  # without the config: what ArchSpec says
    cache = kv_cache(spec, 4096, config=config)
    assert cache.layer_bytes == (77_824,) * 3 + (4096 * 2 * 64 * 2 * 2,)
    assert kv_cache(spec, 1024, config=config).layer_bytes[0] == 77_824  # no growth with the context
    assert kv_cache(spec, 4096, slots=1, config=config).layer_bytes[0] == 77_824 // 4
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_NEXT))
    data = json.loads(cli("serve", str(path), "--gpu", "h100", "--engine", "llama.cpp", "--context", "4096",
                          "--json").stdout)
    assert data["kv_cache_bytes"] == cache.total_bytes
    # vLLM and SGLang keep these states in a layout not priced here: a clear refusal
    with pytest.raises(CalculatorError) as refused:
        from calculator.core.gpus import gpu
        from calculator.serving.plan import serve

        serve(tiny_next, gpu("h100"), context=4096)
    assert refused.value.code == "serve_linear_attention"
    bad = cli("serve", str(path), "--gpu", "h100")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "linear-attention" in bad.stderr
