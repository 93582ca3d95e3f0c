"""The case's workload in the memory chapters: oom, quantization, serving and
fine-tuning. Caches are pinned by hand from each model's config; the pages' answers
(each widget's pure answer_for) against the CLI's."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.serving.plan import serve
from calculator.memory.workloads import length_of, lengths_at, shape, varies
from guide import chapters
from guide.widgets import context_memory, quant_formats, training_memory
from guide.inputs.common import Inputs
from guide.inputs.training import setup_of
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

T4 = gpu("t4")


def inputs_of(slug: str, model: str, **changes) -> Inputs:
    case = replace(chapters.by_slug(slug).defaults, **changes)
    return Inputs(catalog_model(model), gpu(case.gpu), case.dtype, case.batch, case.prompt, case.new_tokens,
                  case.sequence, case.method, case.precision, case.optimizer, case.checkpointing,
                  workload=case.workload)


def cli_json(*args: str) -> dict:
    out = cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def kv_by_hand(layers: int, width: int, batch: int, tokens: int, bytes_per_value: int = 2) -> int:
    """Keys and values: 2 x layers x (heads x head size) x bytes x batch x tokens."""
    return 2 * layers * width * bytes_per_value * batch * tokens


# Whisper-small's config: d_model 768 (12 heads of 64), 12 decoder layers, 1,500 encoder frames
# (3,000 mel frames of a 30 s window halved by the second convolution's stride of 2).
WHISPER_SMALL = {"layers": 12, "width": 768}
# t5-base's config: d_kv 64 x 12 heads = 768, 12 decoder layers.
T5_BASE = {"layers": 12, "width": 768}


def test_lengths_a_memory_calculator_varies():
    whisper, t5 = catalog_model("whisper-small").spec, catalog_model("t5-base").spec
    speech = shape(whisper, "speech", new_tokens=128)
    assert not varies(speech) and length_of(speech) == 1500
    assert lengths_at(speech, 9) == {"prompt": 4, "new_tokens": 128, "encoder_tokens": 1500, "mode": "generate"}
    seq2seq = shape(t5, "seq2seq", prompt=400, new_tokens=100)
    assert varies(seq2seq) and length_of(seq2seq) == 400
    assert lengths_at(seq2seq, 64) == {"prompt": 1, "new_tokens": 100, "encoder_tokens": 64, "mode": "generate"}
    bert = shape(catalog_model("bert-base-cased").spec, "forward", sequence=128)
    assert lengths_at(bert, 300) == {"context": 300, "mode": "forward"}
    vit = shape(catalog_model("vit-base-patch16-224").spec, "vision")
    assert not varies(vit) and length_of(vit) == (224 // 16) ** 2 + 1  # 196 patches and the class token


def test_whisper_on_the_oom_page_is_one_window_whose_cache_is_worked_by_hand():
    inputs = inputs_of("oom", "whisper-small", gpu="t4", new_tokens=128)
    answer = context_memory.answer_for(inputs)
    assert (answer.figures["largest_context"], answer.figures["span"], answer.figures["varies"]) == (1500, 1500, False)
    data = cli_json("inference", "whisper-small", "--batch", "4", "--new-tokens", "128", "--gpu", "t4")
    # the decoder's 4 task tokens + 128 new ones, and the 1,500 frames in each decoder layer
    own, cross = kv_by_hand(**WHISPER_SMALL, batch=4, tokens=4 + 128), kv_by_hand(**WHISPER_SMALL, batch=4, tokens=1500)
    assert data["kv_cache_bytes"] == own + cross == 2 * 12 * 768 * 2 * 4 * 1632
    assert data["largest_context"] == answer.figures["largest_context"]


def test_t5_on_the_oom_page_searches_the_encoders_input():
    inputs = inputs_of("oom", "t5-base", gpu="t4", batch=1024, prompt=100, new_tokens=100)
    answer = context_memory.answer_for(inputs)
    largest = answer.figures["largest_context"]
    data = cli_json("inference", "t5-base", "--workload", "seq2seq", "--batch", "1024", "--prompt", "100",
                    "--new-tokens", "100", "--gpu", "t4")
    assert data["kv_cache_bytes"] == kv_by_hand(**T5_BASE, batch=1024, tokens=1 + 100) + kv_by_hand(
        **T5_BASE, batch=1024, tokens=100)
    assert (data["largest_context"], data["largest_context_tight"]) == (largest, answer.figures["largest_context_tight"])
    assert 0 < largest < 512  # a batch of 1,024 stops short of the 512 positions
    # the edge: one more encoder token and the cache alone grows by 2 x 12 x 768 x 2 x 1,024 bytes
    at = cli_json("inference", "t5-base", "--workload", "seq2seq", "--batch", "1024", "--prompt", str(largest + 1),
                  "--new-tokens", "100", "--gpu", "t4")
    before = cli_json("inference", "t5-base", "--workload", "seq2seq", "--batch", "1024", "--prompt", str(largest),
                      "--new-tokens", "100", "--gpu", "t4")
    assert at["kv_cache_bytes"] - before["kv_cache_bytes"] == kv_by_hand(**T5_BASE, batch=1024, tokens=1)
    assert before["verdict"] == "fits" and at["verdict"] != "fits"


def test_vision_on_the_oom_page_is_one_image():
    inputs = inputs_of("oom", "vit-base-patch16-224", gpu="t4")
    answer = context_memory.answer_for(inputs)
    assert (answer.figures["largest_context"], answer.figures["span"]) == (197, 197)
    data = cli_json("inference", "vit-base-patch16-224", "--workload", "vision", "--batch", "4", "--gpu", "t4")
    assert (data["context"], data["kv_cache_bytes"], data["largest_context"]) == (197, 0, 197)


@pytest.mark.parametrize("model,args", [("whisper-small", ("--new-tokens", "128")),
                                        ("t5-base", ("--prompt", "400", "--new-tokens", "100")),
                                        ("vit-base-patch16-224", ()), ("bert-base-cased", ("--prompt", "128"))])
def test_quantization_page_prices_the_workload_as_the_cli(model, args):
    changes = dict(zip(("prompt" if a == "--prompt" else "new_tokens" for a in args[::2]), map(int, args[1::2])))
    inputs = inputs_of("quantization", model, gpu="t4", batch=8, **changes)
    page = quant_formats.answer_for(inputs, 128)
    data = cli_json("quantize", model, "--gpu", "t4", "--batch", "8", "--group-size", "128", *args)
    assert data["workload"] == inputs.work
    assert [(r["format"], r["peak_bytes"], r["verdict"]) for r in data["rows"]] == [
        (r["format"], r["peak_bytes"], r["verdict"]) for r in page.figures["formats"]]
    # the bfloat16 row's peak is the inference run of the same workload
    run = {"whisper-small": ("--new-tokens", "128"), "t5-base": ("--workload", "seq2seq", *args),
           "vit-base-patch16-224": ("--workload", "vision"), "bert-base-cased": ("--workload", "forward",
                                                                                 "--context", "128")}[model]
    peak = cli_json("inference", model, "--batch", "8", *run)["total_bytes"]
    assert page.figures["formats"][0]["format"] == "bfloat16" and page.figures["formats"][0]["peak_bytes"] == peak


def test_quantize_refuses_a_workload_the_model_cannot_run():
    out = cli("quantize", "gpt2", "--gpu", "t4", "--workload", "speech")
    assert out.returncode == 2 and "speech" in out.stderr and "Traceback" not in out.stderr


def test_serving_tells_whisper_what_is_true_in_both_languages():
    with pytest.raises(CalculatorError) as error:
        serve(catalog_model("whisper-small"), gpu("h100"))
    assert error.value.code == "serve_speech"
    english, french = error.value.message("en"), error.value.message("fr")
    assert "/v1/audio/transcriptions" in english and "does not generate" not in english
    assert "/v1/audio/transcriptions" in french and "API de transcription" in french
    with pytest.raises(CalculatorError) as error:
        serve(catalog_model("t5-base"), gpu("h100"))
    assert error.value.code == "serve_encoder_decoder" and "cross-attention" in error.value.message("en")
    assert "attention croisée" in error.value.message("fr")
    out = cli("serve", "whisper-small", "--gpu", "h100")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "transcription" in out.stderr


def test_a_bert_classifiers_training_runs_over_the_case_sequence():
    """fine-tuning#training-memory: an encoder classifier trains over `sequence` tokens (the
    forward workload's length), as the CLI's train --sequence."""
    activations = {}
    for sequence in (128, 256):
        inputs = inputs_of("fine-tuning", "bert-base-cased", gpu="t4", method="full", checkpointing="none",
                           sequence=sequence, batch=8)
        page = training_memory.answer_for(inputs, setup_of(inputs))
        data = cli_json("train", "bert-base-cased", "--method", "full", "--precision", inputs.precision, "--batch", "8",
                        "--sequence", str(sequence), "--gpu", "t4")
        assert (data["largest_micro_batch"], data["total_bytes"]) == (page.figures["largest_micro_batch"],
                                                                      page.detail.total_bytes)
        activations[sequence] = page.detail.activations_bytes
        # gradients of every trainable weight, in bfloat16 (the autocast recipe's weights)
        assert data["gradients_bytes"] == 2 * data["trainable_parameters"]
    assert activations[256] > 2 * activations[128] * 0.9  # linear in the tokens, and more with attention scores
