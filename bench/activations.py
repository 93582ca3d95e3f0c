"""Activation peak: the calculator against what a real model holds on the CPU.

Each case builds a small model with random weights, runs it as the calculator's mode says
(bench/measure.py: generate = the prefill of model.generate; loglikelihood = a forward
with transformers' default cache, then float32 log-probabilities) under LiveBytes, a
TorchDispatchMode that counts the bytes of every live tensor an operator returned. Weights
and inputs are made before and not counted. The measured activation is the peak minus the
cache's own tensors; the error is the calculator's activation peak against it.

What the CPU measurement captures: every tensor transformers and PyTorch hand back to
Python, at the moment it is alive. What it cannot capture: memory a kernel allocates and
frees inside itself (the fused attention kernel's blocks, BLAS packing buffers), and what
CUDA adds on a GPU: the CUDA context and cuBLAS workspaces (outside max_memory_allocated),
the caching allocator's rounding of blocks and its free-but-reserved memory, and kernels
that differ from the CPU's (SDPA's flash kernel on the GPU keeps no score matrix either).

Three grids. DEV: the cases the model was built and debugged against. HELD_OUT: other
shapes, batch sizes, lengths and dtypes of the same six families, written down before the
model was finished and run only to check it. OTHER_FAMILIES: families whose code was not
read line by line; they use the closest layout and are reported, not targeted.
Target: activation peak within 10% on the CPU. Run: python -m bench activations
"""

from __future__ import annotations

from dataclasses import dataclass
import time

GRIDS = ("dev", "held_out", "other_families")

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 256,
         "intermediate_size": 688, "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 4,
         "max_position_embeddings": 4096, "vocab_size": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
MODELS = {
    # development models
    "llama": LLAMA,
    "mistral": {**LLAMA, "architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 96},
    "gemma2": {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_activation": "gelu_pytorch_tanh",
               "hidden_size": 256, "head_dim": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
               "intermediate_size": 1024, "num_hidden_layers": 4, "sliding_window": 64, "query_pre_attn_scalar": 64,
               "vocab_size": 4096, "max_position_embeddings": 4096},
    "mixtral": {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu",
                "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2,
                "num_hidden_layers": 4, "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 4096,
                "max_position_embeddings": 4096, "sliding_window": None, "tie_word_embeddings": False},
    "gpt2": "catalog:gpt2",
    "t5-small": "catalog:t5-small",
    # a narrow MLP, so that the attention's own moments hold the peak under SDPA
    "llama-narrow": {**LLAMA, "intermediate_size": 16, "num_key_value_heads": 8},
    "mistral-narrow": {**LLAMA, "architectures": ["MistralForCausalLM"], "model_type": "mistral",
                       "sliding_window": 64, "intermediate_size": 16},
    # held-out shapes (multi-head attention, tied embeddings, other widths and windows)
    "llama-mha": {**LLAMA, "hidden_size": 384, "intermediate_size": 1024, "num_attention_heads": 6,
                  "num_key_value_heads": 6, "num_hidden_layers": 3, "vocab_size": 6000, "tie_word_embeddings": True},
    "mistral-w128": {**LLAMA, "architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 128,
                     "hidden_size": 320, "intermediate_size": 896, "num_attention_heads": 10, "num_key_value_heads": 5},
    "gemma2-w128": {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
                    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 192, "head_dim": 48,
                    "num_attention_heads": 4, "num_key_value_heads": 1, "intermediate_size": 768,
                    "num_hidden_layers": 3, "sliding_window": 128, "query_pre_attn_scalar": 48, "vocab_size": 5000,
                    "max_position_embeddings": 4096},
    "mixtral-e4": {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu",
                   "hidden_size": 192, "intermediate_size": 384, "num_attention_heads": 6, "num_key_value_heads": 3,
                   "num_hidden_layers": 3, "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 3000,
                   "max_position_embeddings": 4096, "sliding_window": None, "tie_word_embeddings": False},
}
SMALL = {"hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 4, "num_hidden_layers": 3,
         "intermediate_size": 704, "vocab_size": 4096}
OTHER = {  # catalog configs, scaled down
    "qwen2.5-0.5b": ("qwen2.5-0.5b", SMALL),
    "pythia-160m": ("pythia-160m", {}),
    "opt-1.3b": ("opt-1.3b", {"hidden_size": 256, "num_attention_heads": 8, "num_hidden_layers": 3, "ffn_dim": 1024,
                              "word_embed_proj_dim": 256, "vocab_size": 4096}),
    "phi-2": ("phi-2", {**SMALL, "num_key_value_heads": 8}),
    "falcon-7b": ("falcon-7b", {"hidden_size": 256, "num_attention_heads": 8, "num_hidden_layers": 3,
                                "vocab_size": 4096}),
    "qwen3-30b-a3b": ("qwen3-30b-a3b", {**SMALL, "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2,
                                        "moe_intermediate_size": 192}),
}


@dataclass(frozen=True)
class Case:
    model: str
    attention: str
    mode: str
    batch: int
    tokens: int
    dtype: str


def _dev() -> list[Case]:
    cases = []
    for model in ("llama", "mistral", "gemma2", "mixtral", "gpt2", "t5-small"):
        for attention in ("sdpa", "eager"):
            for mode in ("generate", "loglikelihood"):
                cases += [Case(model, attention, mode, 2, 256, "float32"), Case(model, attention, mode, 1, 512, "bfloat16"),
                          Case(model, attention, mode, 4, 64, "float32")]
    for model in ("llama-narrow", "mistral-narrow"):
        for attention in ("sdpa", "eager"):
            cases += [Case(model, attention, "generate", 2, 256, "float32"),
                      Case(model, attention, "generate", 2, 256, "bfloat16")]
    return cases


HELD_OUT = [
    Case("llama-mha", "sdpa", "generate", 3, 200, "bfloat16"),
    Case("llama-mha", "eager", "loglikelihood", 3, 200, "float32"),
    Case("llama-mha", "eager", "generate", 1, 640, "bfloat16"),
    Case("llama-mha", "sdpa", "loglikelihood", 1, 640, "bfloat16"),
    Case("mistral-w128", "sdpa", "generate", 3, 300, "float32"),
    Case("mistral-w128", "eager", "generate", 3, 300, "bfloat16"),
    Case("mistral-w128", "sdpa", "generate", 1, 100, "float32"),
    Case("gemma2-w128", "eager", "generate", 3, 300, "bfloat16"),
    Case("gemma2-w128", "eager", "loglikelihood", 3, 300, "float32"),
    Case("mixtral-e4", "sdpa", "generate", 3, 200, "bfloat16"),
    Case("mixtral-e4", "eager", "generate", 3, 200, "float32"),
    Case("mixtral-e4", "sdpa", "loglikelihood", 3, 200, "bfloat16"),
    Case("gpt2", "sdpa", "generate", 3, 200, "bfloat16"),
    Case("gpt2", "eager", "loglikelihood", 3, 200, "bfloat16"),
    Case("gpt2", "eager", "generate", 1, 640, "float32"),
    Case("t5-small", "sdpa", "generate", 3, 200, "bfloat16"),
    Case("t5-small", "eager", "loglikelihood", 3, 200, "float32"),
    Case("t5-small", "sdpa", "generate", 1, 640, "float32"),
]
OTHER_FAMILIES = [Case(name, attention, mode, 2, 160, "float32") for name in OTHER
                  for attention, mode in (("sdpa", "generate"), ("eager", "generate"), ("sdpa", "loglikelihood"))]


def config_of(name: str) -> dict:
    from calculator.models import catalog

    if name in OTHER:
        key, overrides = OTHER[name]
        return {**catalog.config(key), **overrides}
    source = MODELS[name]
    return catalog.config(source.removeprefix("catalog:")) if isinstance(source, str) else source


def run_case(case: Case) -> dict:
    """Measure one case on the CPU and predict it."""
    from calculator.models.architecture import spec_from_config
    from calculator.memory.inference import peak_phase
    from bench.measure import measure_inference, random_model
    from calculator.models.meta import make_config

    config = config_of(case.model)
    spec = spec_from_config(make_config(config))
    model = random_model(config, case.dtype, case.attention).eval()
    started = time.perf_counter()
    peak, cache = measure_inference(model, case.batch, case.tokens, case.mode)
    seconds = time.perf_counter() - started
    # generate runs one decoding step of an encoder-decoder: its decoder cache holds one token
    decoder = 1 if spec.kind == "encoder-decoder" and case.mode == "generate" else None
    phase = peak_phase(spec, case.batch, case.tokens, case.dtype, case.attention, case.mode, decoder_tokens=decoder)
    measured, predicted = peak - cache, phase.total_bytes - cache
    return {"case": case, "peak": peak, "cache": cache, "measured": measured, "predicted": predicted,
            "error": predicted / measured - 1, "moment": phase.name, "seconds": seconds,
            "sdpa_unsupported": not spec.sdpa}


def cases(grid: str) -> list[Case]:
    return {"dev": _dev(), "held_out": HELD_OUT, "other_families": OTHER_FAMILIES}[grid]


def _mib(n: int) -> str:
    return f"{n / 2**20:.3f}"


def report(grid: str, rows: list[dict]) -> None:
    print(f"\n#### {grid.replace('_', ' ')} ({len(rows)} cases)\n")
    print("| model | attention | mode | batch x tokens | dtype | measured activation (MiB) | predicted (MiB) "
          "| error | peak moment |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c = r["case"]
        attention = c.attention + (" (runs eager)" if r["sdpa_unsupported"] else "")
        print(f"| {c.model} | {attention} | {c.mode} | {c.batch} x {c.tokens} | {c.dtype} | {_mib(r['measured'])} "
              f"| {_mib(r['predicted'])} | {r['error']:+.1%} | {r['moment']} |")
    errors = [abs(r["error"]) for r in rows]
    within = sum(e <= 0.10 for e in errors)
    print(f"\nLargest error {max(errors):.1%}, median {sorted(errors)[len(errors) // 2]:.1%}; "
          f"{within} of {len(rows)} cases within 10%.")


def main(grids: tuple[str, ...] = GRIDS) -> None:
    for grid in grids:
        report(grid, [run_case(case) for case in cases(grid)])
