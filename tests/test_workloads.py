"""Workloads: Whisper in the catalog, its cross-attention cache by hand and against a real
generate() on the CPU, a BERT forward pass measured on the CPU, each workload's default, its
speed and a measured speed against the ceiling, through the engine and the CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch
import transformers

from bench.measure import LiveBytes, cache_tensor_bytes
from calculator.models import catalog
from calculator.models.architecture import spec_from_config
from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.memory.inference import inference_memory, kv_cache_bytes
from calculator.models.meta import make_config
from calculator.models.seam import catalog_model
from calculator.memory.workload_speed import against_ceiling, workload_speed
from calculator.memory.workloads import default_workload, shape, workload_for, workloads_for
from tests.cli_runner import run_cli
from tests.conftest import ROOT

# The parameter counts of OpenAI's model card (github.com/openai/whisper, "Available models
# and languages"; the Hub's model cards repeat it), in millions. large-v3 is "large" (1550 M).
WHISPER_CARD_MILLIONS = {"whisper-base": 74, "whisper-small": 244, "whisper-medium": 769,
                         "whisper-large-v3": 1550, "whisper-large-v3-turbo": 809}


@pytest.mark.parametrize("key,millions", WHISPER_CARD_MILLIONS.items())
def test_whisper_counts_match_the_model_card_within_2_percent(key, millions):
    assert catalog.stored_summary(key).parameters == pytest.approx(millions * 1e6, rel=0.02)


def test_whisper_tiny_matches_the_hubs_safetensors_count():
    # The card rounds tiny to "39 M"; the Hub's safetensors metadata of openai/whisper-tiny says
    # 37.8M parameters (the same code as every other count here: 37,760,640).
    assert catalog.stored_summary("whisper-tiny").parameters == pytest.approx(37.8e6, rel=0.002)


def test_whisper_shape_comes_from_its_config():
    spec = catalog.stored_spec("whisper-large-v3-turbo")
    assert (spec.kind, spec.layers, spec.encoder_layers, spec.encoder_tokens, spec.max_positions) == \
        ("encoder-decoder", 4, 32, 1500, 448)
    assert catalog.stored_spec("vit-base-patch16-224").encoder_tokens == (224 // 16) ** 2 + 1


def test_each_architecture_gets_its_own_workload():
    defaults = {key: default_workload(catalog.stored_spec(key))
                for key in ("gpt2", "bert-base-cased", "t5-small", "whisper-small", "vit-base-patch16-224")}
    assert defaults == {"gpt2": "generation", "bert-base-cased": "forward", "t5-small": "seq2seq",
                        "whisper-small": "speech", "vit-base-patch16-224": "vision"}
    assert workloads_for(catalog.stored_spec("gpt2")) == ("generation", "forward")
    # a case set for a decoder keeps working when the reader picks an encoder
    assert workload_for(catalog.stored_spec("bert-base-cased"), "generation") == "forward"


def test_whisper_large_v3_cache_by_hand():
    # 16 windows, 128 new tokens after Whisper's 4 task tokens, bfloat16 (2 bytes):
    # self-attention: 32 layers x (keys + values) x 20 heads x 64 x 132 tokens x 16 x 2 bytes
    # cross-attention: 32 layers x (keys + values) x 1280 x 1500 frames x 16 x 2 bytes
    self_attention = 32 * 2 * 20 * 64 * 132 * 16 * 2
    cross_attention = 32 * 2 * 1280 * 1500 * 16 * 2
    assert (self_attention, cross_attention) == (346_030_080, 3_932_160_000)
    model = catalog_model("whisper-large-v3")
    memory = inference_memory(model.summary, model.spec, 16, dtype="bfloat16",
                              **shape(model.spec, "speech", new_tokens=128).memory_lengths)
    assert memory.kv_cache_bytes == self_attention + cross_attention
    assert (memory.prompt, memory.new_tokens, memory.encoder_tokens) == (4, 128, 1500)


def test_the_cli_answers_the_issues_whisper_question():
    out = cli("inference", "whisper-large-v3", "--batch", "16", "--new-tokens", "128", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["workload"] == "speech" and data["encoder_tokens"] == 1500
    assert data["kv_cache_bytes"] == 32 * 2 * 1280 * 2 * 16 * (1500 + 132)


WHISPER_SMALL = {"d_model": 64, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "encoder_layers": 2,
                 "decoder_layers": 2, "encoder_attention_heads": 4, "decoder_attention_heads": 4}


def test_whisper_cache_equals_a_real_generate_on_the_cpu():
    config = make_config({**catalog.config("whisper-tiny"), **WHISPER_SMALL})
    spec = spec_from_config(config)
    torch.manual_seed(0)
    model = transformers.WhisperForConditionalGeneration._from_config(config, dtype=torch.float32).eval()
    features = torch.randn(2, 80, 3000)  # two 30 s windows of log-mel features
    start = torch.full((2, 4), config.decoder_start_token_id)
    with torch.inference_mode():
        out = model.generate(input_features=features, decoder_input_ids=start, max_new_tokens=5, min_new_tokens=5,
                             return_dict_in_generate=True)
    assert out.sequences.shape == (2, 9)
    # the last token generated is never fed back: the cache holds 8 of the decoder's tokens
    assert cache_tensor_bytes(out.past_key_values) == kv_cache_bytes(spec, 2, 8, "float32", encoder_tokens=1500)


BERT_SMALL = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
              "vocab_size": 3000}


@pytest.mark.parametrize("architecture", ["BertForMaskedLM", "BertForSequenceClassification", "BertModel"])
def test_bert_forward_activation_peak_measured_on_the_cpu(architecture):
    config = {**catalog.config("bert-base-cased"), **BERT_SMALL, "architectures": [architecture]}
    cfg = make_config(config)
    spec = spec_from_config(cfg)
    torch.manual_seed(0)
    model = getattr(transformers, architecture)._from_config(cfg, dtype=torch.float32,
                                                             attn_implementation="sdpa").eval()
    batch, tokens = 4, 96
    ids = torch.randint(0, 3000, (batch, tokens))
    mask = torch.ones_like(ids)
    with torch.inference_mode(), LiveBytes() as live:
        out = model(input_ids=ids, attention_mask=mask)
        del out
    predicted = inference_memory(make_summary(config), spec, batch, tokens, "float32", mode="forward")
    assert predicted.kv_cache_bytes == 0
    assert predicted.activation_peak_bytes == pytest.approx(live.peak, rel=0.01)


def make_summary(config):
    from calculator.models.meta import count_config

    return count_config(config, "auto")


def test_forward_speed_by_hand():
    # bert-base-cased, 8 x 128 tokens, bfloat16 on an A100: 2 FLOPs per parameter per token,
    # plus 4 x layers x heads x head size per (query, key) pair; compute-bound
    model, card = catalog_model("bert-base-cased"), gpu("a100-80gb")
    run = workload_speed(model.summary, model.spec, card, "bfloat16", 8, shape(model.spec, "forward", sequence=128))
    flops = 8 * (2 * model.summary.parameters * 128 + 4 * 12 * 12 * 64 * 128 * 128)
    seconds = flops / (card.matmul_tflops("bfloat16") * 1e12)
    assert run.bound == "compute"
    assert run.seconds_per_batch == pytest.approx(seconds)
    assert run.items_per_second == pytest.approx(8 / seconds)
    assert run.seconds_for(1000) == pytest.approx(125 * seconds)


def test_speech_speed_counts_audio_hours():
    model, card = catalog_model("whisper-small"), gpu("t4")
    run = workload_speed(model.summary, model.spec, card, "float16", 16, shape(model.spec, "speech", new_tokens=128))
    assert run.audio_hours_per_hour == pytest.approx(run.items_per_second * 30)
    assert run.tokens_per_second == pytest.approx(run.items_per_second * 128)
    assert run.time_to_first_token < run.seconds_per_batch


def test_the_encoder_is_a_share_of_the_parameters():
    from calculator.memory.workload_speed import encoder_parameters

    # Whisper-small's encoder: 12 layers of 4 x 768^2 (attention) + 2 x 768 x 3072 (MLP)
    assert encoder_parameters(catalog.stored_spec("whisper-small")) == 12 * (4 * 768**2 + 2 * 768 * 3072)


@pytest.mark.parametrize("fraction,verdict,section", [(0.1, "far_below", "slow-model#inference-code"),
                                                      (0.5, "below", "slow-model#batch-size"),
                                                      (0.9, "near", "slow-model#precision"),
                                                      (1.5, "above", "slow-model#triage")])
def test_a_measured_speed_against_the_ceiling(fraction, verdict, section):
    model, card = catalog_model("gpt2"), gpu("t4")
    run = workload_speed(model.summary, model.spec, card, "float16", 8, shape(model.spec, "generation", prompt=256,
                                                                              new_tokens=64))
    answer = against_ceiling(fraction * run.tokens_per_second, run)
    assert (answer.verdict, answer.next_section) == (verdict, section)
    assert answer.fraction == pytest.approx(fraction)


@pytest.mark.parametrize("bad", [0, -3, math.inf, math.nan, 1e13])
def test_a_measured_speed_must_be_a_positive_number(bad):
    model = catalog_model("gpt2")
    run = workload_speed(model.summary, model.spec, gpu("t4"), "float16", 1, shape(model.spec, "generation"))
    with pytest.raises(CalculatorError):
        against_ceiling(bad, run)


def cli(*args):
    return run_cli(*args)  # in this process (tests/cli_runner.py)


def test_speed_forward_mode_rows_and_measured():
    out = cli("speed", "bert-base-cased", "--gpu", "t4", "--mode", "forward", "--sequence", "128", "--batches", "1",
              "32", "--measured", "100", "--json")
    data = json.loads(out.stdout)
    assert data["workload"] == "forward" and data["sequence"] == 128
    assert all(row["sequences_per_second"] > 0 for row in data["rows"])
    first = data["rows"][0]["sequences_per_second"]
    assert data["measured"]["fraction"] == pytest.approx(100 / first)


@pytest.mark.parametrize("args", [("speed", "gpt2", "--gpu", "t4", "--measured", "-1"),
                                  ("speed", "gpt2", "--gpu", "t4", "--workload", "speech"),
                                  ("inference", "gpt2", "--batch", "2", "--context", "8", "--encoder", "4"),
                                  ("inference", "whisper-tiny", "--batch", "2", "--encoder", "3000",
                                   "--workload", "speech")])
def test_bad_workload_input_is_one_line_and_exit_2(args):
    out = cli(*args)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_every_calculator_reads_whispers_window_without_being_told():
    # the memory chapters give a prompt and an answer: for Whisper the prompt is the decoder's
    model = catalog_model("whisper-small")
    told = inference_memory(model.summary, model.spec, 8, prompt=4, new_tokens=100, encoder_tokens=1500)
    untold = inference_memory(model.summary, model.spec, 8, prompt=4, new_tokens=100)
    assert untold == told and untold.encoder_tokens == 1500
    # cross-attention: 12 layers x keys and values x 768 x 1500 frames x 8 x 2 bytes, beside the decoder's own
    assert untold.kv_cache_bytes == 12 * 2 * 768 * 8 * 2 * (1500 + 104)


def test_inference_and_speed_give_the_same_ceiling_for_a_measured_speed():
    inference = json.loads(cli("inference", "whisper-small", "--batch", "16", "--new-tokens", "128", "--gpu", "t4",
                               "--measured", "6", "--json").stdout)["measured"]
    # the same precision on both sides without asking: float16 on a T4 (no bfloat16 tensor cores)
    assert json.loads(cli("inference", "whisper-small", "--batch", "16", "--gpu", "t4", "--json").stdout)["dtype"] == "float16"
    speed = json.loads(cli("speed", "whisper-small", "--gpu", "t4", "--batches", "16",
                           "--new-tokens", "128", "--measured", "6", "--json").stdout)
    assert inference["ceiling"] == pytest.approx(speed["rows"][0]["items_per_second"])
    assert inference["fraction"] == pytest.approx(speed["measured"]["fraction"])
    assert inference["unit"] == "items_per_second" and speed["rows"][0]["audio_hours_per_hour"] > 0
    out = cli("inference", "gpt2", "--batch", "2", "--context", "8", "--measured", "9")
    assert out.returncode == 2 and "--gpu" in out.stderr and out.stderr.count("\n") == 1


def test_the_chapters_whisper_figure_is_the_engines():
    # slow-model#batch-size: "16 windows of Whisper large-v3 ... about 3.9 GB of cross-attention cache"
    model = catalog_model("whisper-large-v3")
    with_answer = inference_memory(model.summary, model.spec, 16, prompt=4, new_tokens=1)
    cross = with_answer.kv_cache_bytes - kv_cache_bytes(model.spec, 16, 5, "bfloat16", encoder_tokens=0)
    assert round(cross / 1e9, 1) == 3.9
    for lang, words, frames in (("en", "about 3.9 GB of", "1,500 frames"), ("fr", "environ 3,9 Go de", "1 500 trames")):
        text = " ".join((ROOT / "content" / lang / "slow-model.md").read_text(encoding="utf-8").split())
        assert words in text and frames in text


def test_a_vision_model_reads_its_patches_without_a_length():
    data = json.loads(cli("inference", "vit-base-patch16-224", "--batch", "64", "--json").stdout)
    assert (data["workload"], data["mode"], data["context"], data["kv_cache_bytes"]) == ("vision", "forward", 197, 0)


def test_whisper_encoder_time_by_hand():
    # whisper-tiny, one 30 s window, float16 on an A100: the encoder's 4 layers hold
    # 4 x 384^2 (attention) + 2 x 384 x 1536 (MLP) = 1,769,472 weights each, 7,077,888 in all;
    # per frame 2 FLOPs per weight, and 4 x heads x head size x 1,500 frames per layer of attention
    model, card = catalog_model("whisper-tiny"), gpu("a100-80gb")
    flops = 1500 * (2 * 7_077_888 + 4 * 4 * 6 * 64 * 1500)
    assert flops == 1500 * (14_155_776 + 9_216_000) == 35_057_664_000
    encoder_seconds = flops / (card.matmul_tflops("float16") * 1e12)  # compute-bound: 14 MB of weights
    run = workload_speed(model.summary, model.spec, card, "float16", 1, shape(model.spec, "speech", new_tokens=64))
    # then the decoder's prefill, memory-bound: its weights (all but the encoder's) and the
    # prompt's cache (4 layers x keys and values x 384 x (4 task tokens + 1,500 frames) x 2 bytes)
    decoder_bytes = (37_760_640 - 7_077_888) * 2
    prompt_cache = 4 * 2 * 384 * (4 + 1500) * 2
    prefill_seconds = (decoder_bytes + prompt_cache) / (card.bandwidth_gbs * 1e9)
    assert run.time_to_first_token == pytest.approx(encoder_seconds + prefill_seconds, rel=1e-6)
    assert run.seconds_per_batch == pytest.approx(run.time_to_first_token + 64 * run.time_per_token)
    assert run.items_per_second == pytest.approx(1 / run.seconds_per_batch)
