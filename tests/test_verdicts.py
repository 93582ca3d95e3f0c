"""The answers of calculator/answers/verdicts.py, pinned by hand: the budget's thresholds worked out from
their definition (DESIGN.md, "Units and verdicts"), the issue #22 cases, the precision a card
computes in (datasheets), and the time of a training epoch from its formula."""

from __future__ import annotations

from dataclasses import replace
import math

import pytest

from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.memory.workloads import shape
from calculator.memory.inference import inference_memory
from calculator.models.seam import catalog_model
from calculator.training import TrainingSetup
from calculator.answers.verdicts import (Answer, Assumption, compute_dtype_for, context_span, data_parallel_answer,
                                 default_checkpointing, formats_answer, largest_batch_answer, largest_context_answer,
                                 largest_micro_batch_answer, offload_limits, pipeline_answer, speed_answer,
                                 tensor_parallel_answer, weights_per_gpu, worst)

GIB = 2**30


def limit_of(card) -> int:
    """What "fits" allows, by hand: the usable memory less 5% of it, rounded up."""
    return card.usable_bytes - math.ceil(card.usable_bytes * 5 / 100)


def reserved_by_hand(memory) -> int:
    """The caching allocator's reserve of a peak: what comes and goes gets 10% on top."""
    steady = getattr(memory, "steady_bytes", 0)
    return memory.total_bytes + getattr(memory, "rounding_bytes", 0) + math.ceil((memory.total_bytes - steady) / 10)


@pytest.mark.parametrize("card", ["t4", "rtx4090", "h100"])
def test_weights_per_gpu_reads_the_budget_edges(card):
    card = gpu(card)
    limit, usable = limit_of(card), card.usable_bytes
    answer = weights_per_gpu([limit, limit + 1, usable, usable + 1], card)
    assert answer.figures["per_gpu_verdicts"] == ["fits", "tight", "tight", "too_big"]
    assert answer.verdict == "too_big" and answer.figures["usable_bytes"] == usable
    assert weights_per_gpu([limit], card).verdict == "fits"
    assert weights_per_gpu([limit], None).verdict is None  # no card, no verdict
    assert worst(["fits", "tight"]) == "tight" and worst([]) == "fits"


def test_tensor_parallel_on_a_t4_is_read_against_the_usable_memory():
    """Issue #22: degree 1 on a T4 said "fits" against the card's nvidia-smi total."""
    model, t4 = catalog_model("llama-3.1-8b"), gpu("t4")
    one = tensor_parallel_answer(model, t4, "bfloat16", 1, 2048)
    # every parameter in 16 bits, and Llama 3.1's rotary buffers (inv_freq, original_inv_freq: 2 x 64 float32)
    assert one.detail.per_gpu_bytes == 2 * 8_030_261_248 + 2 * 64 * 4
    assert one.detail.per_gpu_bytes > t4.usable_bytes and one.verdict == "too_big"
    two = tensor_parallel_answer(model, t4, "bfloat16", 2, 2048)
    assert two.detail.per_gpu_bytes <= limit_of(t4) and two.verdict == "fits"
    assert ("weights_only", None) in [(a.id, a.value) for a in one.assumptions]


def test_pipeline_stages_each_get_a_verdict():
    model, t4 = catalog_model("llama-3.1-8b"), gpu("t4")
    one, two = pipeline_answer(model, t4, "bfloat16", 1), pipeline_answer(model, t4, "bfloat16", 2)
    assert one.verdict == "too_big" and two.verdict == "fits"
    assert [s.bytes for s in two.detail] == two.figures["weights_per_gpu_bytes"]
    assert sum(two.figures["weights_per_gpu_bytes"]) == 2 * 8_030_261_248 + 2 * 64 * 4


def test_largest_batch_is_the_last_that_fits_by_hand():
    """Issue #22: `speed` gave 67 against the raw card, `inference` 50: one answer now."""
    model, t4 = catalog_model("llama-3.2-1b"), gpu("t4")
    lengths = {"prompt": 2000, "new_tokens": 48}
    answer = largest_batch_answer(model, t4, lengths, dtype="float16")
    n = answer.figures["largest_batch"]
    at = inference_memory(model.summary, model.spec, n, dtype="float16", **lengths)
    past = inference_memory(model.summary, model.spec, n + 1, dtype="float16", **lengths)
    assert reserved_by_hand(at) <= limit_of(t4) < reserved_by_hand(past)
    assert past.total_bytes <= t4.memory_bytes  # the raw card would have taken one more: the old answer
    work = shape(model.spec, "generation", prompt=2000, new_tokens=48)  # speed_answer takes the workload's run
    speed = speed_answer(model, t4, "float16", work, [1, n, n + 1])
    assert speed.figures["largest_batch"] == n
    assert [r["verdict"] for r in speed.figures["rows"]][:2] == ["fits", "fits"]
    assert speed.figures["rows"][2]["verdict"] in ("tight", "too_big")


def test_largest_context_is_all_prompt_and_says_so():
    model, l4 = catalog_model("llama-3.1-8b"), gpu("l4")
    answer = largest_context_answer(model, l4, 2, dtype="bfloat16")
    t = answer.figures["largest_context"]
    at, past = (inference_memory(model.summary, model.spec, 2, n, dtype="bfloat16") for n in (t, t + 1))
    assert reserved_by_hand(at) <= limit_of(l4) < reserved_by_hand(past)
    assert answer.assumed("context_all_prompt") is None and answer.assumed("span") == 131_072
    # asked with a prompt and an answer, the question is the same: the lengths do not count
    assert largest_context_answer(model, l4, 2, dtype="bfloat16", prompt=10, new_tokens=500).figures == answer.figures
    silent = replace(model.spec, max_positions=0)  # a model that does not say: the search stops at 32,768
    assert context_span(silent) == 32_768 and context_span(catalog_model("t5-small").spec) == 512


def test_formats_for_mixtral_on_a_4090():
    """Issue #22: GPTQ 4-bit (22.98 GiB of weights) said to fit a card that gives 22.28 GiB."""
    model, card = catalog_model("mixtral-8x7b-v0.1"), gpu("rtx4090")
    answer = formats_answer(model, card, 1, 2048, 512, 128)
    gptq = next(r for r in answer.figures["formats"] if r["format"] == "gptq-4bit")
    weights = next(r for r in answer.detail if r.format == "gptq-4bit").total_bytes
    assert weights == pytest.approx(22.98 * GIB, abs=0.01 * GIB)
    assert gptq["peak_bytes"] > weights and gptq["reserved_bytes"] > card.usable_bytes and gptq["verdict"] == "too_big"
    assert answer.figures["fitting"] == ["Q3_K", "Q2_K"]  # 18.7 and 14.3 GiB of weights
    assert answer.verdict == "fits"


def test_the_precision_a_card_computes_in():
    assert compute_dtype_for(gpu("t4")) == ("float16", Assumption("compute_dtype", {
        "dtype": "float16", "reason": "no_bf16_tensor_cores", "gpu": "t4"}))
    for card in ("l4", "a100-80gb", "h100"):  # Ampere and later have bfloat16 tensor cores
        assert compute_dtype_for(gpu(card))[0] == "bfloat16"
    assert compute_dtype_for(gpu("t4"), "float32")[0] == "float32"  # only bfloat16 is swapped


def test_data_parallel_training_time_by_hand():
    """One epoch: 6 FLOPs per parameter per token at 40% of the peak; on a T4 the float16 peak
    (65 TFLOPS, the T4 datasheet), not bfloat16's float32 rate (8.1)."""
    model, t4 = catalog_model("bert-base-cased"), gpu("t4")
    answer = data_parallel_answer(model, t4, 1000, 128, 1, 1, "Ethernet 25 Gb/s", True)
    per_sample = 6 * model.summary.parameters * 128 / (65e12 * 0.4)
    assert answer.figures["one_gpu_seconds"] == pytest.approx(1000 * per_sample)
    assert answer.figures["dtype"] == "float16" and answer.assumed("compute_dtype")["reason"] == "no_bf16_tensor_cores"
    inference = data_parallel_answer(model, t4, 1000, 128, 4, 1, "Ethernet 25 Gb/s", False, counts=(1, 4))
    assert inference.figures["seconds_by_gpus"][4] == inference.figures["seconds"]
    assert 1 <= inference.figures["batch"] <= 256 and inference.assumed("batch_capped") == 256


def test_fine_tuning_defaults_and_largest_micro_batch():
    assert [default_checkpointing(m) for m in ("full", "lora", "qlora")] == ["none", "full", "full"]
    model, card = catalog_model("mistral-7b-v0.1"), gpu("a100-40gb")
    lora = TrainingSetup(method="lora", precision="bf16-autocast", micro_batch=4, sequence=4096,
                         checkpointing=default_checkpointing("lora"))
    answer = largest_micro_batch_answer(model, card, lora)
    assert answer.figures["largest_micro_batch"] >= 1 and answer.assumed("checkpointing") == "full"
    without = largest_micro_batch_answer(model, card, TrainingSetup(method="lora", precision="bf16-autocast",
                                                                    micro_batch=4, sequence=4096))
    assert without.figures["largest_micro_batch"] < answer.figures["largest_micro_batch"]


def test_offload_limits():
    t4 = gpu("t4")
    assert offload_limits(t4, t4.memory_bytes).figures["gpu_budget_over_card"] is False
    assert offload_limits(t4, t4.memory_bytes + 1).figures["gpu_budget_over_card"] is True
    assert offload_limits(t4, GIB, 3 * GIB, 2 * GIB).verdict == "too_big"
    assert offload_limits(t4, GIB, 2 * GIB, 2 * GIB).figures["disk_too_small"] is False


def test_answer_json_and_assumptions():
    answer = Answer("q", "fits", {"n": 1}, (Assumption("lengths", {"prompt": 1}),))
    assert answer.to_json() == {"verdict": "fits", "n": 1, "assumptions": [{"id": "lengths", "value": {"prompt": 1}}]}
    with pytest.raises(KeyError):
        answer.assumed("span")


def test_refusals_reach_the_caller():
    with pytest.raises(CalculatorError):
        tensor_parallel_answer(catalog_model("llama-3.1-8b"), gpu("t4"), "bfloat16", 3, 2048)
