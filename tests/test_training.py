"""Training memory: model states against the ZeRO paper and DeepSpeed's own estimators,
activations against Korthikanti et al., LoRA counts against a real peft model, quantized
and 8-bit sizes by hand, the saved tensors of a real CPU model, and the inverse questions."""

from __future__ import annotations

import math
import warnings

import pytest

from calculator.models import catalog
from calculator.models.architecture import ArchSpec, spec_from_config
from calculator.core.errors import CalculatorError
from calculator.models.meta import count_config, make_config
from calculator.models.summary import Linear, ModelSummary, Unit
from calculator.training import (
    Layout, ModelTraits, TensorGroup, TrainingSetup, activation_model, candidate_gpu_counts, fewest_gpus,
    largest_micro_batch, layer_activation_bytes, lora_parameters, nf4_bytes, optimizer_state_bytes,
    optimizer_step_temporary, quantized_base_bytes, rule_of_thumb_bytes, strategy_layout, traits_from_config,
    training_memory,
)
from tests.conftest import load_test_config

GB = 10**9


def toy(parameters: int, largest: int = 0, hidden: int = 4096) -> tuple[ModelSummary, ArchSpec]:
    """A model of `parameters` parameters and nothing else: one layer, no buffers, and (for
    DeepSpeed's stage 3) one embedding of `largest` parameters."""
    units = (Unit("embed", largest), Unit("layers.0", parameters - largest)) if largest else (Unit("layers.0", parameters),)
    summary = ModelSummary(architecture="Toy", model_type="toy", model_class="auto", parameters=parameters,
                           trainable_parameters=parameters, active_parameters=None, fixed_buffer_bytes=0,
                           scaled_buffer_elements=0, units=units, groups={"embedding": largest})
    spec = ArchSpec(kind="decoder", hidden=hidden, layers=1, encoder_layers=0, heads=32, head_dim=128, kv_heads=32,
                    intermediate=4 * hidden, gated_mlp=False, vocab=0)
    return summary, spec


def states(parameters: int, gpus: int, stage: int, accounting: str = "paper", optimizer: str = "adamw",
           largest: int = 0, **layout) -> int:
    summary, spec = toy(parameters, largest)
    memory = training_memory(summary, spec, TrainingSetup(optimizer=optimizer, micro_batch=1, sequence=1),
                             Layout(gpus, zero=stage, accounting=accounting, **layout))
    extra = memory.buffers_bytes if accounting == "deepspeed" else 0
    return memory.model_state_bytes + extra


# The ZeRO paper (Rajbhandari et al., SC 2020), Figure 1: mixed-precision Adam, K = 12.
PSI = 7_500_000_000


@pytest.mark.parametrize("gpus", [1, 8, 64, 500])
def test_zero_stages_equal_the_papers_expressions(gpus):
    assert states(PSI, gpus, 0) == (2 + 2 + 12) * PSI
    assert states(PSI, gpus, 1) == 2 * PSI + 2 * PSI + 12 * PSI // gpus
    assert states(PSI, gpus, 2) == 2 * PSI + (2 + 12) * PSI // gpus
    assert states(PSI, gpus, 3) == (2 + 2 + 12) * PSI // gpus


def test_uneven_shards_round_up():
    """A shard holds whole parameters: with 1,024 GPUs each part rounds up, by under a byte each."""
    exact = 2 * PSI + (2 + 12) * PSI / 1024
    assert 0 < states(PSI, 1024, 2) - exact < 3


def test_the_papers_worked_example():
    """7.5B parameters on 64 GPUs: 120 GB, 31.4 GB, 16.6 GB and 1.9 GB per GPU."""
    figures = [states(PSI, 64, stage) / GB for stage in (0, 1, 2, 3)]
    assert [round(f, 1) for f in figures] == [120.0, 31.4, 16.6, 1.9]


def test_other_optimizers_change_k():
    """SGD with momentum: K = 4 (master) + 4 (momentum) = 8; bfloat16 AdamW: no master,
    two 16-bit moments."""
    assert states(PSI, 8, 1, optimizer="sgd") == 4 * PSI + 8 * PSI // 8
    summary, spec = toy(PSI)
    bf16 = training_memory(summary, spec, TrainingSetup(precision="bfloat16", micro_batch=1, sequence=1), Layout())
    assert bf16.model_state_bytes == (2 + 2 + 4) * PSI
    fp32 = training_memory(summary, spec, TrainingSetup(precision="float32", micro_batch=1, sequence=1), Layout(4, zero=3))
    assert fp32.model_state_bytes == (4 + 4 + 8) * PSI // 4


# DeepSpeed's estimators, worked by hand from their formulas (deepspeed/runtime/zero/
# stage_1_and_2.py and stage3.py): zero2 = 4P + 16P/N (offload: 2P); zero3 = 4L + 18P/N
# (offload optimizer: 4L + 2P/N; offload both: 4L), L the largest layer's parameters.
LLAMA3_8B = 8_030_261_248
EMBEDDING = 525_336_576  # Llama-3-8B's largest module: 128,256 x 4,096


@pytest.mark.parametrize("gpus", [1, 4, 8, 16])
def test_deepspeed_zero2_estimator(gpus):
    assert states(LLAMA3_8B, gpus, 2, "deepspeed") == 4 * LLAMA3_8B + int(16 * LLAMA3_8B / gpus)
    offloaded = states(LLAMA3_8B, gpus, 2, "deepspeed", offload_optimizer=True)
    assert offloaded == 2 * LLAMA3_8B


@pytest.mark.parametrize("gpus", [1, 4, 8, 16])
def test_deepspeed_zero3_estimator(gpus):
    L, P = EMBEDDING, LLAMA3_8B
    assert states(P, gpus, 3, "deepspeed", largest=L) == 4 * L + int(18 * P / gpus)
    assert states(P, gpus, 3, "deepspeed", largest=L, offload_optimizer=True) == 4 * L + int(2 * P / gpus)
    assert states(P, gpus, 3, "deepspeed", largest=L, offload_optimizer=True, offload_parameters=True) == 4 * L


def test_deepspeed_estimator_on_the_real_llama_3_8b():
    """8 GPUs, stage 3: 4 x 525,336,576 + 18 x 8,030,261,248 / 8 = 20,169,434,112 bytes,
    plus the model's own 512 bytes of rotary buffers."""
    summary, spec = catalog.stored_summary("llama-3-8b"), catalog.stored_spec("llama-3-8b")
    memory = training_memory(summary, spec, TrainingSetup(), Layout(8, zero=3, accounting="deepspeed"))
    assert memory.model_state_bytes + memory.buffers_bytes == 20_169_434_112 + 512


# Activations: Korthikanti et al. 2022, a GPT layer in 16 bits keeps 34sbh + 5as^2b bytes.
S, B, H, A, T = 2048, 1, 1024, 16, 4
GPT_TRAITS = ModelTraits(norm="layer", activation="gelu", hidden_dropout=0.1, attention_dropout=0.1)


def gpt_layer() -> tuple[ModelSummary, ArchSpec]:
    linears = (Linear("c_attn", H, 3 * H, 1), Linear("c_proj", H, H, 1), Linear("c_fc", H, 4 * H, 1),
               Linear("c_proj", 4 * H, H, 1))
    parameters = sum(m.parameters for m in linears)
    summary = ModelSummary(architecture="GPT", model_type="gpt2", model_class="auto", parameters=parameters,
                           trainable_parameters=parameters, active_parameters=None, fixed_buffer_bytes=0,
                           scaled_buffer_elements=0, units=(Unit("h.0", parameters),), linears=linears,
                           groups={"linear": parameters})
    spec = ArchSpec(kind="decoder", hidden=H, layers=1, encoder_layers=0, heads=A, head_dim=H // A, kv_heads=A,
                    intermediate=4 * H, gated_mlp=False, vocab=0)
    return summary, spec


def gpt_activations(checkpointing="none", tensor=1, sequence_parallel=True) -> int:
    summary, spec = gpt_layer()
    setup = TrainingSetup(precision="bfloat16", attention="eager", micro_batch=B, sequence=S,
                          checkpointing=checkpointing)
    return layer_activation_bytes(summary, spec, GPT_TRAITS, setup, tensor, sequence_parallel)


def test_korthikanti_no_recomputation():
    # plus the mean and 1/std (float32) that each of the two LayerNorms keeps, which the paper leaves out
    stats = 2 * 8 * S * B
    assert gpt_activations() == 34 * S * B * H + 5 * A * S * S * B + stats


def test_korthikanti_selective_and_full_recomputation():
    stats = 2 * 8 * S * B
    assert gpt_activations("selective") == 34 * S * B * H + stats
    assert gpt_activations("full") == 2 * S * B * H


def test_korthikanti_tensor_and_sequence_parallelism():
    stats = 2 * 8 * S * B
    plain = S * B * H * 10 + (24 * S * B * H + 5 * A * S * S * B) // T + stats
    assert gpt_activations(tensor=T, sequence_parallel=False) == plain
    assert gpt_activations(tensor=T) == (34 * S * B * H + 5 * A * S * S * B + stats) // T


def test_pipeline_first_stage_keeps_one_micro_batch_per_stage():
    """1F1B: the first of p stages holds p micro-batches of its L/p layers, that is the
    activations of L layers (Korthikanti et al., section 4.2)."""
    summary, spec = catalog.stored_summary("llama-2-7b"), catalog.stored_spec("llama-2-7b")
    setup = TrainingSetup(micro_batch=1, sequence=4096, gradient_accumulation=16)
    traits = traits_from_config(catalog.config("llama-2-7b"))
    per_layer = layer_activation_bytes(summary, spec, traits, setup)
    model = activation_model(summary, spec, traits, setup)
    first = training_memory(summary, spec, setup, Layout(4, pipeline=4), traits)
    assert first.pipeline_stage == 0  # the stage that holds the most
    assert first.activations_bytes == 4 * (8 * per_layer + model.embedding_bytes)  # 32 layers / 4 stages


# LoRA: trainable parameters equal those of a real peft model -------------------------------

TINY = {
    "tiny-llama": lambda: load_test_config("tiny-llama"),
    "tiny-mixtral": lambda: load_test_config("tiny-mixtral"),
    "tiny-gemma2": lambda: load_test_config("tiny-gemma2"),
    "gpt2": lambda: {**catalog.config("gpt2"), "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 300},
    "t5": lambda: {**catalog.config("t5-small"), "d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4,
                   "d_kv": 16, "vocab_size": 300},
}


def peft_trainable(config: dict, rank: int, targets) -> int:
    import peft
    import transformers

    model = getattr(transformers, config["architectures"][0])._from_config(make_config(config))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lora = peft.get_peft_model(model, peft.LoraConfig(r=rank, target_modules=targets))
    return sum(p.numel() for p in lora.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", list(TINY))
def test_lora_all_linear_equals_peft(name):
    config = TINY[name]()
    assert lora_parameters(count_config(config), 8, "all-linear") == peft_trainable(config, 8, "all-linear")


@pytest.mark.parametrize("name,targets", [("tiny-llama", "q_proj,v_proj"), ("gpt2", "c_attn"),
                                          ("tiny-mixtral", "q_proj,gate"), ("t5", "q,v,wo")])
def test_lora_named_targets_equal_peft(name, targets):
    config = TINY[name]()
    assert lora_parameters(count_config(config), 4, targets) == peft_trainable(config, 4, targets.split(","))


def test_lora_by_hand_on_llama_3_8b():
    """Rank 16 on q_proj and v_proj: 32 layers x 16 x ((4096 + 4096) + (4096 + 1024))."""
    summary = catalog.stored_summary("llama-3-8b")
    assert lora_parameters(summary, 16, "q_proj,v_proj") == 32 * 16 * (8192 + 5120) == 6_815_744


def test_lora_rejects_unknown_targets():
    summary = catalog.stored_summary("llama-3-8b")
    with pytest.raises(CalculatorError) as error:
        lora_parameters(summary, 16, "q_proj,not_a_layer")
    assert error.value.code == "lora_unknown_target" and "not_a_layer" in error.value.message("fr")
    with pytest.raises(CalculatorError):
        lora_parameters(summary, 16, " , ")


# Quantized weights and 8-bit optimizer states, by hand -------------------------------------

def test_nf4_bits_per_parameter():
    """QLoRA (Dettmers et al., 2023): 4 bits, plus 32/64 = 0.5 bit of constants, or
    8/64 + 32/(64 x 256) = 0.127 bit with double quantization."""
    numel = 4096 * 4096
    single = nf4_bytes(4096, 4096, double_quant=False)
    double = nf4_bytes(4096, 4096, double_quant=True)
    assert single == numel // 2 + (numel // 64) * 4
    assert double == numel // 2 + numel // 64 + 4 * (numel // 64 // 256) + 4
    assert 8 * single / numel == 4.5
    assert round(8 * double / numel - 4, 3) == 0.127


def test_qlora_base_keeps_head_and_embeddings_in_16_bits():
    summary = catalog.stored_summary("llama-3-8b")
    quantized = [m for m in summary.linears if m.kind == "linear"]
    expected = sum(m.count * nf4_bytes(m.out_features, m.in_features) for m in quantized)
    expected += (summary.parameters - sum(m.parameters for m in quantized)) * 2
    assert quantized_base_bytes(summary, 2) == expected
    assert 5.0e9 < quantized_base_bytes(summary, 2) < 6.0e9  # about 5.5 GB, against 16 GB in bfloat16


def test_optimizer_states_by_hand():
    matrix, vector = TensorGroup(4096, 4096, 1), TensorGroup(1000, 1, 1)
    assert optimizer_state_bytes([matrix, vector], "adamw", 4) == 8 * (4096 * 4096 + 1000)
    assert optimizer_state_bytes([matrix, vector], "sgd", 4) == 4 * (4096 * 4096 + 1000)
    # Adafactor: a row and a column mean for the matrix, the full second moment of the vector
    assert optimizer_state_bytes([matrix, vector], "adafactor", 4) == 4 * (4096 + 4096) + 4 * 1000
    # bitsandbytes: one byte per moment and a float32 scale per 256 values; float32 moments
    # under 4,096 values; the two 256-value quantization maps
    assert optimizer_state_bytes([matrix, vector], "adamw-8bit", 4) == \
        2 * (4096 * 4096 + 4 * 4096 * 4096 // 256) + 2 * 4 * 1000 + 2 * 256 * 4


def test_optimizer_step_temporaries():
    # two matrices of 1,000 values in each of 3 layers, then a vector of 50
    tensors = [TensorGroup(100, 10, 3), TensorGroup(10, 100, 3), TensorGroup(50, 1, 1)]
    assert optimizer_step_temporary(tensors, "adamw", "fused", 4) == 0
    assert optimizer_step_temporary(tensors, "adamw", "foreach", 4) == 4 * (6000 + 50)
    # one tensor's sqrt(v) and its scaled copy, while the previous one's is still referenced
    assert optimizer_step_temporary(tensors, "adamw", "for-loop", 4) == 4 * 3 * 1000
    # Adafactor's full-size estimate of one matrix next to the previous one's
    assert optimizer_step_temporary(tensors, "adafactor", "for-loop", 4) == 4 * 2 * 1000
    assert optimizer_step_temporary(tensors, "sgd", "foreach", 4) == 0


# The real model, built on the CPU: the tensors autograd keeps ------------------------------

def saved_bytes(config: dict, precision: str, attention: str, batch: int, tokens: int, lora: str | None = None) -> int:
    """Bytes of every distinct storage autograd saves during one forward, parameters excluded."""
    import torch
    import transformers

    dtype = torch.bfloat16 if precision == "bfloat16" else torch.float32
    torch.manual_seed(0)
    model = getattr(transformers, config["architectures"][0])._from_config(
        make_config(config), dtype=dtype, attn_implementation=attention)
    if lora:
        import peft

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=lora.split(",")),
                                        autocast_adapter_dtype=False)
    return autograd_saved_bytes(model, config["vocab_size"], batch, tokens)


def autograd_saved_bytes(model, vocab: int, batch: int, tokens: int) -> int:
    """Bytes of every distinct storage autograd saves during one training forward of a text
    batch of random tokens, the model's parameters excluded."""
    import torch

    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    ids = torch.randint(0, vocab, (batch, tokens))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    return sum(seen.values())


@pytest.mark.parametrize("precision,attention,lora", [
    ("float32", "sdpa", None), ("bfloat16", "sdpa", None), ("bfloat16", "eager", None),
    ("float32", "sdpa", "q_proj,v_proj"), ("bfloat16", "sdpa", "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"),
])
def test_activations_equal_what_autograd_keeps(precision, attention, lora):
    """Within 1%: the model leaves out RoPE's cos/sin tables and the int64 labels."""
    config = {**load_test_config("tiny-llama"), "hidden_size": 128, "intermediate_size": 344, "vocab_size": 512}
    setup = TrainingSetup(precision=precision, attention=attention, micro_batch=2, sequence=96, device="cpu",
                          method="lora" if lora else "full", lora_targets=lora or "all-linear", lora_rank=8,
                          adapter_dtype="base")  # saved_bytes builds its adapters with autocast_adapter_dtype=False
    memory = training_memory(count_config(config), spec_from_config(make_config(config)), setup,
                             traits=traits_from_config(config))
    measured = saved_bytes(config, precision, attention, 2, 96, lora)
    assert memory.activations_bytes == pytest.approx(measured, rel=0.01)


def test_models_without_sdpa_are_counted_with_eager_attention():
    """Gemma 2 has no SDPA path in transformers (its scores are softcapped): asking for SDPA
    still runs eager attention, whose scores grow with the square of the sequence."""
    config = load_test_config("tiny-gemma2")
    spec = spec_from_config(make_config(config))
    assert not spec.sdpa

    def activations(attention: str, sequence: int) -> int:
        setup = TrainingSetup(precision="bfloat16", attention=attention, micro_batch=2, sequence=sequence,
                              device="cpu")
        return training_memory(count_config(config), spec, setup, traits=traits_from_config(config)).activations_bytes

    assert activations("sdpa", 128) == activations("eager", 128)
    llama = load_test_config("tiny-llama")
    llama_spec = spec_from_config(make_config(llama))
    llama_setups = [TrainingSetup(precision="bfloat16", attention=a, micro_batch=2, sequence=128, device="cpu")
                    for a in ("sdpa", "eager")]
    sdpa, eager = (training_memory(count_config(llama), llama_spec, s, traits=traits_from_config(llama))
                   .activations_bytes for s in llama_setups)
    assert eager > sdpa  # the same choice matters where SDPA exists


# The peak, its phase and its parts ---------------------------------------------------------

def test_at_peak_adds_up_and_components_are_consistent():
    summary, spec = catalog.stored_summary("llama-3-8b"), catalog.stored_spec("llama-3-8b")
    for setup in (TrainingSetup(), TrainingSetup(method="lora", micro_batch=4), TrainingSetup(method="qlora"),
                  TrainingSetup(precision="amp", checkpointing="full", micro_batch=8)):
        memory = training_memory(summary, spec, setup)
        assert sum(memory.at_peak.values()) == memory.total_bytes
        assert memory.total_bytes == max(memory.forward_backward_bytes, memory.optimizer_step_bytes)
        assert memory.peak_phase == ("optimizer-step" if memory.optimizer_step_bytes > memory.forward_backward_bytes
                                     else "forward-backward")


def test_which_phase_sets_the_peak():
    summary, spec = catalog.stored_summary("llama-3-8b"), catalog.stored_spec("llama-3-8b")
    full = training_memory(summary, spec, TrainingSetup(micro_batch=1, sequence=512, optimizer_impl="foreach"))
    assert full.peak_phase == "optimizer-step"  # gradients, states and foreach's copy of every sqrt(v)
    lora = training_memory(summary, spec, TrainingSetup(method="lora", micro_batch=8, sequence=4096))
    assert lora.peak_phase == "forward-backward"


def test_mixed_precision_weights_include_the_master_copy():
    summary, spec = catalog.stored_summary("llama-3-8b"), catalog.stored_spec("llama-3-8b")
    memory = training_memory(summary, spec, TrainingSetup(precision="mixed"))
    assert memory.master_weights_bytes == 4 * LLAMA3_8B
    assert memory.weights_bytes == 6 * LLAMA3_8B + 512  # 16-bit weights, float32 master, buffers
    assert memory.gradients_bytes == 2 * LLAMA3_8B and memory.optimizer_bytes == 8 * LLAMA3_8B


def test_rule_of_thumb_is_four_times_the_bfloat16_weights():
    assert rule_of_thumb_bytes(LLAMA3_8B) == 4 * (2 * LLAMA3_8B)


def test_checkpointing_and_lora_reduce_memory():
    summary, spec = catalog.stored_summary("llama-3.1-8b"), catalog.stored_spec("llama-3.1-8b")
    base = TrainingSetup(micro_batch=4, sequence=4096)
    none = training_memory(summary, spec, base).activations_bytes
    full = training_memory(summary, spec, TrainingSetup(micro_batch=4, sequence=4096, checkpointing="full"))
    assert full.activations_bytes < none / 4
    lora = training_memory(summary, spec, TrainingSetup(method="lora", micro_batch=4, sequence=4096))
    qlora = training_memory(summary, spec, TrainingSetup(method="qlora", micro_batch=4, sequence=4096))
    assert qlora.weights_bytes < lora.weights_bytes < training_memory(summary, spec, base).weights_bytes


def test_offload_moves_states_to_the_cpu():
    summary, spec = catalog.stored_summary("llama-3-8b"), catalog.stored_spec("llama-3-8b")
    memory = training_memory(summary, spec, TrainingSetup(), Layout(4, zero=2, offload_optimizer=True))
    assert memory.optimizer_bytes == 0 and memory.gradients_bytes == 0
    # master weights (4), Adam states (8) and float32 gradients (4): 16 bytes per parameter, shared by 4
    assert memory.cpu_bytes == 16 * LLAMA3_8B // 4


def test_tensor_parallelism_splits_weights():
    summary, spec = catalog.stored_summary("llama-2-13b"), catalog.stored_spec("llama-2-13b")
    one = training_memory(summary, spec, TrainingSetup(), Layout(1))
    four = training_memory(summary, spec, TrainingSetup(), Layout(4, tensor=4))
    norms = summary.groups["norm"]  # replicated; the rest splits 4 ways (6 bytes: 16-bit + master)
    expected = math.ceil(norms * 6 + (summary.parameters - norms) * 6 / 4) + summary.buffer_bytes_at("bfloat16")
    assert four.weights_bytes == expected
    assert one.weights_bytes == 6 * summary.parameters + summary.buffer_bytes_at("bfloat16")


# Inverse questions -------------------------------------------------------------------------

def test_largest_micro_batch_fits_and_one_more_does_not():
    summary, spec = catalog.stored_summary("llama-3.2-1b"), catalog.stored_spec("llama-3.2-1b")
    capacity = 24 * 2**30
    setup = TrainingSetup(sequence=2048)
    batch = largest_micro_batch(summary, spec, capacity, setup)
    assert batch >= 1
    fits = lambda b: training_memory(summary, spec, TrainingSetup(sequence=2048, micro_batch=b)).total_bytes  # noqa: E731
    assert fits(batch) <= capacity < fits(batch + 1)
    assert largest_micro_batch(summary, spec, 2**30, setup) == 0


@pytest.mark.parametrize("strategy", ["zero1", "zero2", "zero3", "zero3-offload", "tensor", "pipeline", "tensor-pipeline"])
def test_fewest_gpus_is_the_first_count_that_fits(strategy):
    summary, spec = catalog.stored_summary("llama-2-13b"), catalog.stored_spec("llama-2-13b")
    capacity = 80 * 2**30
    result = fewest_gpus(summary, spec, capacity, strategy)
    assert result.gpus > 0 and result.memory.total_bytes <= capacity
    smaller = [n for n in candidate_gpu_counts() if n < result.gpus and strategy_layout(strategy, n, spec)]
    for n in smaller:
        assert training_memory(summary, spec, TrainingSetup(), strategy_layout(strategy, n, spec)).total_bytes > capacity


def test_ddp_never_needs_more_than_one_gpu_or_never_fits():
    summary, spec = catalog.stored_summary("llama-2-13b"), catalog.stored_spec("llama-2-13b")
    assert fewest_gpus(summary, spec, 80 * 2**30, "ddp").gpus == 0
    small, small_spec = catalog.stored_summary("gpt2"), catalog.stored_spec("gpt2")
    assert fewest_gpus(small, small_spec, 80 * 2**30, "ddp").gpus == 1


# Bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("layout,code", [
    (Layout(6, tensor=4), "bad_layout"),
    (Layout(3, tensor=3), "tensor_heads"),
    (Layout(64, pipeline=64), "pipeline_layers"),
    (Layout(2, offload_optimizer=True), "offload_needs_zero"),
    (Layout(2, zero=2, offload_optimizer=True, offload_parameters=True), "param_offload_needs_zero3"),
    (Layout(0), "out_of_range"),
])
def test_bad_layouts_say_what_to_do(layout, code):
    summary, spec = catalog.stored_summary("llama-2-7b"), catalog.stored_spec("llama-2-7b")
    with pytest.raises(CalculatorError) as error:
        training_memory(summary, spec, TrainingSetup(), layout)
    assert error.value.code == code
    assert error.value.message("fr") != error.value.message("en")


@pytest.mark.parametrize("setup", [TrainingSetup(method="dora"), TrainingSetup(micro_batch=0),
                                   TrainingSetup(precision="fp8"), TrainingSetup(sequence=True)])
def test_bad_setups_are_refused(setup):
    summary, spec = catalog.stored_summary("gpt2"), catalog.stored_spec("gpt2")
    with pytest.raises(CalculatorError):
        training_memory(summary, spec, setup)


def test_traits_from_real_configs():
    gpt2 = traits_from_config(catalog.config("gpt2"))
    assert (gpt2.norm, gpt2.activation, gpt2.hidden_dropout) == ("layer", "gelu_new", 0.1)
    llama = traits_from_config(catalog.config("llama-3-8b"))
    assert (llama.norm, llama.activation, llama.hidden_dropout) == ("rms", "silu", 0.0)
    assert traits_from_config(catalog.config("t5-base")).activation == "relu"
    assert traits_from_config(catalog.config("flan-t5-large")).activation == "gelu_new"


# Properties over the catalog (hypothesis) ---------------------------------------------------

from hypothesis import given, settings, strategies as hs  # noqa: E402

CATALOG = [e.key for e in catalog.entries()]
setups = hs.builds(
    TrainingSetup,
    method=hs.sampled_from(["full", "lora", "qlora"]), precision=hs.sampled_from(["mixed", "bfloat16", "float32", "amp"]),
    optimizer=hs.sampled_from(["adamw", "adamw-8bit", "sgd", "adafactor"]), micro_batch=hs.integers(1, 16),
    sequence=hs.integers(1, 8192), checkpointing=hs.sampled_from(["none", "selective", "full"]),
    attention=hs.sampled_from(["sdpa", "eager"]), gradient_accumulation=hs.integers(1, 8),
    optimizer_impl=hs.sampled_from(["fused", "foreach", "for-loop"]))


@settings(max_examples=60, deadline=None)
@given(hs.sampled_from(CATALOG), setups)
def test_the_peak_adds_up_and_grows_with_the_batch(key, setup):
    summary, spec = catalog.stored_summary(key), catalog.stored_spec(key)
    traits = traits_from_config(catalog.config(key))
    memory = training_memory(summary, spec, setup, traits=traits)
    assert sum(memory.at_peak.values()) == memory.total_bytes
    assert all(value >= 0 for value in memory.at_peak.values())
    bigger = training_memory(summary, spec, TrainingSetup(**{**setup.__dict__, "micro_batch": setup.micro_batch + 1}),
                             traits=traits)
    assert bigger.total_bytes >= memory.total_bytes


@settings(max_examples=30, deadline=None)
@given(hs.sampled_from(CATALOG), hs.integers(2, 512))
def test_each_zero_stage_holds_no_more_than_the_one_before(key, gpus):
    summary, spec = catalog.stored_summary(key), catalog.stored_spec(key)
    setup = TrainingSetup(micro_batch=1, sequence=512)
    states = [training_memory(summary, spec, setup, Layout(gpus, zero=stage)).model_state_bytes for stage in ZERO_ORDER]
    assert states == sorted(states, reverse=True)


ZERO_ORDER = (0, 1, 2, 3)
