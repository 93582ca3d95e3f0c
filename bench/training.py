"""Training peak: the calculator's prediction against one real training step on the CPU.

Each case builds a small model of a real architecture with transformers (and peft for
LoRA), then runs two steps (forward, backward, optimizer step, zero_grad) while
bench.measure.LiveBytes tracks every live tensor: weights, gradients, the optimizer
states created at the first step, the activations kept for the backward pass and every
temporary. The second step is the steady state the calculator predicts (the states
exist). Nothing is fitted to these runs: the calculator's constants come from the way
PyTorch and transformers keep tensors, and the cases marked "check" were only run after
the model was written.

python -m bench training          (or python -m bench.training NAME... for some cases)
"""

from __future__ import annotations

from dataclasses import dataclass, field
import sys
import time

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 256,
         "intermediate_size": 688, "num_attention_heads": 8, "num_key_value_heads": 4, "num_hidden_layers": 4,
         "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "vocab_size": 4096}
WIDE = {**LLAMA, "hidden_size": 512, "intermediate_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 8,
        "num_hidden_layers": 3, "vocab_size": 256}
QWEN2 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu", "hidden_size": 192,
         "intermediate_size": 512, "num_attention_heads": 6, "num_key_value_heads": 2, "num_hidden_layers": 3,
         "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "vocab_size": 6000}
MISTRAL = {**LLAMA, "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 320,
           "intermediate_size": 896, "num_attention_heads": 10, "num_key_value_heads": 2, "num_hidden_layers": 3,
           "sliding_window": 4096, "vocab_size": 3000}
MIXTRAL = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu", "hidden_size": 128,
           "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
           "num_local_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 4096,
           "tie_word_embeddings": False, "vocab_size": 2000}
GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new", "n_embd": 256,
        "n_head": 8, "n_layer": 3, "n_positions": 2048, "n_inner": None, "vocab_size": 3000, "resid_pdrop": 0.1,
        "embd_pdrop": 0.1, "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}


@dataclass(frozen=True)
class Case:
    name: str
    config: dict
    split: str  # "development" (looked at while writing the model) or "check" (held out)
    options: dict = field(default_factory=dict)  # TrainingSetup fields


def cases() -> list[Case]:
    dev = [
        Case("llama fp32 AdamW b2 s256", LLAMA, "development", {"precision": "float32", "micro_batch": 2, "sequence": 256}),
        Case("llama bf16 AdamW b2 s256", LLAMA, "development", {"precision": "bfloat16", "micro_batch": 2, "sequence": 256}),
        Case("llama fp32 AdamW b8 s512", LLAMA, "development", {"precision": "float32", "micro_batch": 8, "sequence": 512}),
        Case("llama amp AdamW b4 s256", LLAMA, "development", {"precision": "amp", "micro_batch": 4, "sequence": 256}),
        Case("llama fp32 SGD b4 s256", LLAMA, "development", {"precision": "float32", "optimizer": "sgd", "micro_batch": 4, "sequence": 256}),
        Case("llama fp32 AdamW foreach b1 s64", LLAMA, "development", {"precision": "float32", "optimizer_impl": "foreach", "micro_batch": 1, "sequence": 64}),
        Case("llama fp32 eager b2 s256", LLAMA, "development", {"precision": "float32", "attention": "eager", "micro_batch": 2, "sequence": 256}),
        Case("llama fp32 checkpointing b8 s256", LLAMA, "development", {"precision": "float32", "checkpointing": "full", "micro_batch": 8, "sequence": 256}),
        Case("llama fp32 LoRA all-linear b4 s256", LLAMA, "development", {"precision": "float32", "method": "lora", "lora_rank": 8, "micro_batch": 4, "sequence": 256}),
        Case("llama fp32 Adafactor b2 s128", LLAMA, "development", {"precision": "float32", "optimizer": "adafactor", "micro_batch": 2, "sequence": 128}),
        Case("wide llama, small vocab, fp32 b4 s512", WIDE, "development", {"precision": "float32", "micro_batch": 4, "sequence": 512}),
        Case("wide llama, small vocab, bf16 eager b2 s1024", WIDE, "development", {"precision": "bfloat16", "attention": "eager", "micro_batch": 2, "sequence": 1024}),
        Case("wide llama, small vocab, fp32 b1 s32", WIDE, "development", {"precision": "float32", "micro_batch": 1, "sequence": 32}),
        Case("wide llama, fused AdamW, fp32 b2 s128", WIDE, "development", {"precision": "float32", "optimizer_impl": "fused", "micro_batch": 2, "sequence": 128}),
        Case("wide llama, Adafactor, fp32 b1 s64", WIDE, "development", {"precision": "float32", "optimizer": "adafactor", "micro_batch": 1, "sequence": 64}),
        Case("wide llama, LoRA all-linear, bf16 b4 s512", WIDE, "development", {"precision": "bfloat16", "method": "lora", "micro_batch": 4, "sequence": 512}),
    ]
    check = [
        Case("llama bf16 eager b4 s512", LLAMA, "check", {"precision": "bfloat16", "attention": "eager", "micro_batch": 4, "sequence": 512}),
        Case("llama bf16 LoRA q,v b8 s256", LLAMA, "check", {"precision": "bfloat16", "method": "lora", "lora_rank": 16, "lora_targets": "q_proj,v_proj", "micro_batch": 8, "sequence": 256}),
        Case("llama amp checkpointing b8 s512", LLAMA, "check", {"precision": "amp", "checkpointing": "full", "micro_batch": 8, "sequence": 512}),
        Case("qwen2 (tied, biases) fp32 b4 s256", QWEN2, "check", {"precision": "float32", "micro_batch": 4, "sequence": 256}),
        Case("qwen2 bf16 SGD b2 s1024", QWEN2, "check", {"precision": "bfloat16", "optimizer": "sgd", "micro_batch": 2, "sequence": 1024}),
        Case("mistral fp32 foreach b1 s128", MISTRAL, "check", {"precision": "float32", "optimizer_impl": "foreach", "micro_batch": 1, "sequence": 128}),
        Case("mistral bf16 Adafactor b4 s512", MISTRAL, "check", {"precision": "bfloat16", "optimizer": "adafactor", "micro_batch": 4, "sequence": 512}),
        Case("mixtral (MoE) fp32 b4 s256", MIXTRAL, "check", {"precision": "float32", "micro_batch": 4, "sequence": 256}),
        Case("gpt2 (dropout) fp32 b4 s256", GPT2, "check", {"precision": "float32", "micro_batch": 4, "sequence": 256}),
        Case("gpt2 bf16 LoRA c_attn b8 s256", GPT2, "check", {"precision": "bfloat16", "method": "lora", "lora_targets": "c_attn", "lora_rank": 8, "micro_batch": 8, "sequence": 256}),
        Case("llama fp32 LoRA checkpointing b8 s512", LLAMA, "check", {"precision": "float32", "method": "lora", "checkpointing": "full", "micro_batch": 8, "sequence": 512}),
    ]
    return dev + check


def predict(case: Case):
    from calculator.models.architecture import spec_from_config
    from calculator.models.meta import count_config, make_config
    from calculator.training import TrainingSetup, traits_from_config, training_memory

    options = {"optimizer_impl": "for-loop", **case.options, "device": "cpu"}
    setup = TrainingSetup(**options)
    summary = count_config(case.config)
    spec = spec_from_config(make_config(case.config))
    return training_memory(summary, spec, setup, traits=traits_from_config(case.config))


def measure(case: Case) -> tuple[int, int]:
    """Peak live bytes of the first and of the second training step."""
    import torch

    from bench.measure import (LiveBytes, prepare_training, random_model, training_dtype, training_step,
                                    training_tokens)
    from calculator.training import TrainingSetup

    setup = TrainingSetup(**{"optimizer_impl": "for-loop", **case.options})
    model = random_model(case.config, training_dtype(setup), setup.attention)
    model, optimizer = prepare_training(model, setup)
    generator = torch.Generator().manual_seed(1)
    peaks = []
    with LiveBytes() as meter:
        meter.count(list(model.parameters()) + list(model.buffers()))
        for _ in range(2):
            meter.reset_peak()
            training_step(model, optimizer, training_tokens(model, setup, generator), setup)
            peaks.append(meter.peak)
    return peaks[0], peaks[1]


def run(selected: list[Case]) -> list[dict]:
    rows = []
    for case in selected:
        started = time.perf_counter()
        first, steady = measure(case)
        predicted = predict(case)
        rows.append({"case": case.name, "split": case.split, "measured": steady, "first_step": first,
                     "predicted": predicted.total_bytes, "phase": predicted.peak_moment,
                     "error": (predicted.total_bytes - steady) / steady, "seconds": time.perf_counter() - started})
    return rows


def main(argv: list[str] | None = None) -> None:
    """All cases (python -m bench training), or those whose name contains an argument
    (python -m bench.training llama)."""
    argv = argv or []
    selected = cases()
    names = [a for a in argv if not a.startswith("--")]
    if names:
        selected = [c for c in selected if any(n in c.name for n in names)]
    rows = run(selected)
    mib = 2**20
    print(f"{'case':42} {'split':11} {'measured':>10} {'predicted':>10} {'error':>7}  peak set by")
    for r in rows:
        print(f"{r['case']:42} {r['split']:11} {r['measured'] / mib:8.2f} MiB {r['predicted'] / mib:8.2f} MiB "
              f"{r['error'] * 100:+6.1f}%  {r['phase']}")
    for split in ("development", "check"):
        errors = [abs(r["error"]) for r in rows if r["split"] == split]
        if errors:
            print(f"{split}: {len(errors)} cases, mean |error| {100 * sum(errors) / len(errors):.1f}%, "
                  f"largest {100 * max(errors):.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
