"""Parity: the command line and the pages give the same answer to the same question (issue
#22). For every catalog model on six cards and the main precisions, each verdict-bearing
answer the CLI prints (calculator.cli.main.main in-process, --json) equals the one the page's
calculator shows: verdict and figure. The page side is each widget's `answer_for`, the pure
function that turns the chapter's case into its request to the engine (the rendering is
checked against the CLI by a few AppTest runs at the end)."""

from __future__ import annotations

from contextlib import redirect_stdout
from dataclasses import replace
from functools import cache
import io
import json

import pytest

from unittest.mock import patch

from calculator.models import catalog

from calculator.cli import main as cli
from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.memory.inference import can_generate
from calculator.models.seam import catalog_model
from calculator.memory.speed import NETWORKS_GBS
from guide import chapters
from guide.widgets import (batch_size, context_memory, data_parallel, pipeline_split, quant_formats, quick_check,
                           tensor_parallel, training_memory)
from guide.inputs.common import Inputs
from guide.inputs.training import setup_of
from guide.inputs.workload import work_of
from tests.apptest import fingerprint, open_page

MODELS = [entry.key for entry in catalog.entries()]
CARDS = ("t4", "l4", "rtx3090", "rtx4090", "a100-80gb", "h100")
# float16 and bfloat16 take the same memory: memory answers run on 16 and 32 bits, speed on all three
DTYPES = ("bfloat16", "float32")
LARGE = {"llama-3.1-405b", "deepseek-v3"}  # too big for every card here: their answers are cheap, kept


PARSER = cli.build_parser()  # built once: building it is most of a command's time


def cli_json(*args: str) -> dict:
    """What `python -m calculator ... --json` prints, run in this process (cli.main, with the
    parser built once)."""
    out = io.StringIO()
    with redirect_stdout(out), patch.object(cli, "build_parser", lambda: PARSER):
        code = cli.main([*args, "--json"])
    assert code == 0, args
    return json.loads(out.getvalue())


def cli_refusal(*args: str) -> str | None:
    """The error code the command refuses these arguments with, or None if it answers."""
    try:
        args_ns = PARSER.parse_args([*args, "--json"])
        with redirect_stdout(io.StringIO()):
            args_ns.run(args_ns)
    except CalculatorError as error:
        return error.code
    return None


@cache
def model_of(key: str):
    return catalog_model(key)


def page_inputs(slug: str, model: str, card: str, **changes) -> Inputs:
    """A chapter's case as its calculators receive it, with the model, card and changes set."""
    case = replace(chapters.by_slug(slug).defaults, **changes)
    return Inputs(model_of(model), gpu(card), case.dtype, case.batch, case.prompt, case.new_tokens, case.sequence,
                  case.method, case.precision, case.optimizer, case.checkpointing, workload=case.workload)


def page_refusal(answer_for, *args) -> str | None:
    try:
        answer_for(*args)
    except CalculatorError as error:
        return error.code
    return None


# Loading the model (the home page's case) ---------------------------------------------

@pytest.mark.parametrize("card", CARDS)
def test_load_verdict(card):
    for model in MODELS:
        cli = cli_json("estimate", model, "--dtypes", *DTYPES, "int4", "--gpu", card)
        for row in cli["rows"]:
            page = quick_check.answer_for(page_inputs("", model, card, dtype=row["dtype"]))
            assert (row["verdict"], row["total_bytes"]) == (page.verdict, page.figures["total_bytes"]), model
            assert row["reserved_bytes"] == page.detail.reserved_bytes


# Weights per GPU: tensor and pipeline parallelism (the parallelism chapter's case) --------

@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("dtype", ("bfloat16", "float32"))
def test_tensor_and_pipeline_verdicts(card, dtype):
    for model in MODELS:
        inputs = page_inputs("parallelism", model, card, dtype=dtype)
        for degree in (1, 2):
            try:
                page = tensor_parallel.answer_for(inputs, degree)
            except CalculatorError:
                continue  # the degree does not divide the heads: refused on both sides (test_hostile_cli)
            # --tokens left to its default: the chapter's batch x prompt (1 x 2,048)
            cli = cli_json("tensor-parallel", model, "--degree", str(degree), "--dtype", dtype, "--gpu", card)
            assert (cli["verdict"], cli["per_gpu_bytes"]) == (page.verdict, page.detail.per_gpu_bytes), (model, degree)
            assert cli["fits"] == (page.verdict == "fits")
        page = pipeline_split.answer_for(inputs, 2)
        cli = cli_json("pipeline", model, "--gpus", "2", "--dtype", dtype, "--gpu", card)
        assert (cli["verdict"], cli["per_gpu_verdicts"]) == (page.verdict, page.figures["per_gpu_verdicts"]), model
        assert [s["bytes"] for s in cli["stages"]] == [s.bytes for s in page.detail]


# Largest batch and time per token (the slow-model chapter's case) -----------------------

def speed_workload_args(inputs) -> list[str]:
    """speed's flags for the page's workload (the page reads a forward pass's sequence from
    the prompt, as slow-model#batch-size does); none for a generation."""
    work = work_of(inputs)
    if work.workload == "forward":
        return ["--workload", "forward", "--sequence", str(inputs.prompt)]
    return [] if work.workload == "generation" else ["--workload", work.workload]


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("dtype", (*DTYPES, "float16"))
def test_largest_batch(card, dtype):
    for model in MODELS:
        inputs = page_inputs("slow-model", model, card, dtype=dtype)
        lengths = ["--prompt", str(inputs.prompt), "--new-tokens", str(inputs.new_tokens)]
        workload = speed_workload_args(inputs)
        refused = page_refusal(batch_size.answer_for, inputs)
        if refused:  # a context past the model's positions (gpt2: 1,024; BERT: 512): both refuse it
            assert cli_refusal("speed", model, "--gpu", card, "--dtypes", dtype, *lengths, *workload) == refused, model
            continue
        page = batch_size.answer_for(inputs).figures
        # prompt and answer left to speed's defaults: the chapter's (1,024 + 256)
        speed = cli_json("speed", model, "--gpu", card, "--dtypes", dtype, "--batches", str(inputs.batch), *workload)
        assert speed["largest_batch"][dtype] == page["largest_batch"], model
        if dtype == "bfloat16" and work_of(inputs).workload == "generation":  # --prompt/--new-tokens: a generation's
            run = cli_json("inference", model, "--batch", str(inputs.batch), "--dtype", dtype, "--gpu", card, *lengths)
            assert (run["largest_batch"], run["largest_batch_tight"]) == (
                page["largest_batch"], page["largest_batch_tight"]), model


# Largest context (the oom chapter's case) ------------------------------------------------

def workload_args(inputs) -> list[str]:
    """The CLI's lengths for the page's workload (guide/widgets/workload_inputs.work_of): a
    context for what varies it (the answer searches it, the CLI needs one), the answer's length
    for an encoder-decoder."""
    work = work_of(inputs)
    if work.workload == "generation":
        return ["--context", "16"]
    if work.workload == "forward":
        return ["--workload", "forward", "--context", "16"]
    if work.workload == "vision":
        return ["--workload", "vision"]
    encoder = ["--prompt", "16"] if work.workload == "seq2seq" else []  # the encoder's input: the answer varies it
    return ["--workload", work.workload, *encoder, "--new-tokens", str(inputs.new_tokens)]


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_largest_context(card, dtype):
    for model in MODELS:
        inputs = page_inputs("oom", model, card, dtype=dtype)
        args = ("inference", model, "--batch", str(inputs.batch), *workload_args(inputs), "--dtype", dtype,
                "--gpu", card)
        refused = page_refusal(context_memory.answer_for, inputs)
        if refused:  # an answer past the model's positions (T5: 512, Whisper: 448)
            assert cli_refusal(*args) == refused, model
            continue
        page = context_memory.answer_for(inputs)
        cli = cli_json(*args)
        assert (cli["largest_context"], cli["largest_context_tight"]) == (
            page.figures["largest_context"], page.figures["largest_context_tight"]), model
        assumed = {"id": "context_all_prompt", "value": None} if work_of(inputs).workload == "generation" \
            else {"id": "span", "value": page.figures["span"]}
        assert assumed in cli["assumptions"]


# Formats that fit (the quantization chapter's case) -------------------------------------

@pytest.mark.parametrize("card", CARDS)
def test_formats_that_fit(card):
    for model in MODELS:
        inputs = page_inputs("quantization", model, card)
        refused = page_refusal(quant_formats.answer_for, inputs, 128)
        if refused:
            assert cli_refusal("quantize", model, "--gpu", card, "--group-size", "128") == refused, model
            continue
        page = quant_formats.answer_for(inputs, 128)
        cli = cli_json("quantize", model, "--gpu", card, "--group-size", "128")
        assert [(r["format"], r["verdict"], r["peak_bytes"]) for r in cli["rows"]] == [
            (r["format"], r["verdict"], r["peak_bytes"]) for r in page.figures["formats"]], model
        assert cli["fitting"] == page.figures["fitting"]


# Time for N samples on k GPUs (the slow-model chapter's case) ---------------------------

@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("training", (False, True))
def test_data_parallel_time(card, training):
    network = next(iter(NETWORKS_GBS))
    for model in MODELS:
        inputs = page_inputs("slow-model", model, card)
        # tokens per sample left to the default: the chapter's prompt (1,024)
        args = ("data-parallel", model, "--gpu", card, "--samples", "100000", *(["--training"] if training else []))
        refused = page_refusal(data_parallel.answer_for, inputs, 100_000, 8, 1, network, training)
        if refused:  # samples longer than the model's positions (BERT: 512)
            assert cli_refusal(*args) == refused, model
            continue
        page = data_parallel.answer_for(inputs, 100_000, 8, 1, network, training).figures
        cli = cli_json(*args)
        assert (cli["dtype"], cli["seconds"], cli["one_gpu_seconds"]) == (
            page["dtype"], page["seconds"], page["one_gpu_seconds"]), model
        assert cli["dtype"] == ("float16" if card == "t4" else "bfloat16")


# Largest micro-batch (the fine-tuning chapter's case) -----------------------------------

@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("method", ("lora", "full"))
def test_largest_micro_batch(card, method):
    for model in MODELS:
        if model in LARGE or not can_generate(model_of(model).spec):
            continue
        inputs = page_inputs("fine-tuning", model, card, method=method,
                             checkpointing="none" if method == "full" else "full")
        page = training_memory.answer_for(inputs, setup_of(inputs))
        cli = cli_json("train", model, "--method", method, "--precision", inputs.precision, "--batch",
                       str(inputs.batch), "--sequence", str(inputs.sequence), "--gpu", card)
        assert (cli["verdict"], cli["largest_micro_batch"]) == (
            page.verdict, page.figures["largest_micro_batch"]), (model, method)


# The rendered pages against the CLI: a handful of AppTest runs ---------------------------

def page_text(at) -> str:
    return fingerprint(at)


def test_parallelism_page_says_the_clis_verdict():
    """The issue's case: 16 GB of weights on a T4 with degree 1 said "fits" on the CLI."""
    cli = cli_json("tensor-parallel", "llama-3.1-8b", "--degree", "1", "--dtype", "bfloat16", "--gpu", "t4",
                   "--tokens", "2048")
    assert cli["verdict"] == "too_big" and cli["fits"] is False
    at = open_page("parallelism", "en", model="llama-3.1-8b", gpu="t4", dtype="bfloat16", tp_degree="1")
    assert "does not fit on the NVIDIA T4 with degree 1" in page_text(at)


def test_fine_tuning_page_gives_the_clis_largest_micro_batch():
    """The issue's case: LoRA on an A100 40GB at 4,096 tokens, checkpointing on by default on both."""
    cli = cli_json("train", "mistral-7b-v0.1", "--method", "lora", "--precision", "bf16-autocast", "--batch", "4",
                   "--sequence", "4096", "--gpu", "a100-40gb")
    assert cli["setup"]["checkpointing"] == "full" and cli["largest_micro_batch"] > 0
    at = open_page("fine-tuning", "en", model="mistral-7b-v0.1", gpu="a100-40gb", sequence="4096")
    assert f"is **{cli['largest_micro_batch']}** sequences of 4,096 tokens" in page_text(at)


def test_slow_model_page_times_a_t4_in_float16_as_the_cli():
    cli = cli_json("data-parallel", "llama-3.2-1b", "--gpu", "t4", "--samples", "100000", "--tokens", "1024")
    assert cli["dtype"] == "float16"
    assert {"id": "compute_dtype", "value": {"dtype": "float16", "reason": "no_bf16_tensor_cores", "gpu": "t4"}} \
        in cli["assumptions"]
    at = open_page("slow-model", "en", model="llama-3.2-1b", gpu="t4")
    text = page_text(at)
    assert f"{cli['batch']} at a time" in text and "Computed in float16: the NVIDIA T4" in text
