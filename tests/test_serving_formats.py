"""`serve` with today's formats: vLLM's layouts of mxfp4, nvfp4 and
fp8-block128 weights (calculator/serving/weights.py), the cards and engines that refuse them,
the checkpoint's own format by default, and parity with the serving chapter's calculator."""

from __future__ import annotations

from contextlib import redirect_stderr, redirect_stdout
import io
import json

import pytest

from calculator.answers.serving_json import serve_json
from calculator.cli import main as cli
from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.serving.plan import serve
from calculator.serving.weights import capability, mxfp4_backend

GIB = 2**30
ROTARY = 131_072 * 64 * 2  # vLLM's cos/sin table over every position, bfloat16 (engines.rotary_table_bytes)


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def gpt_oss_20b_bf16_outside_experts() -> int:
    """gpt-oss-20b's bfloat16 weights less its experts and their biases (vLLM's MoE layer
    registers those itself), plus the rotary table and the 256-byte buffers."""
    experts = 24 * 32 * (5760 + 2880) * 2880
    expert_biases = 24 * 32 * (5760 + 2880)
    return 2 * (20_914_757_184 - experts - expert_biases) + 256 + ROTARY


def test_backends_follow_vllms_choice_per_card():
    assert capability(gpu("h100")) == (9, 0) and mxfp4_backend(gpu("h100")) == "triton"
    assert capability(gpu("b200")) == (10, 0) and mxfp4_backend(gpu("b200")) == "flashinfer"
    assert capability(gpu("rtx5090")) == (12, 0) and mxfp4_backend(gpu("rtx5090")) == "marlin"
    assert mxfp4_backend(gpu("rtx4090")) == mxfp4_backend(gpu("a100-80gb")) == "marlin"


def test_gpt_oss_20b_on_marlin_by_hand():
    """Ampere and Ada run MXFP4 experts through Marlin, which pads the intermediate size to a
    multiple of 128 (2880 -> 2944) and the hidden size to 256 (2880 -> 3072): per layer
    w13 [32, 5888, 1536] and w2 [32, 3072, 1472] uint8, scales [32, 5888, 96] and
    [32, 3072, 92], biases [32, 5888] and [32, 3072] in bfloat16. A vLLM run that printed
    these very shapes on the Marlin backend logged "Model loading took 13.7153 GiB"."""
    per_layer = 32 * (5888 * 1536 + 3072 * 1472 + 5888 * 96 + 3072 * 92 + 2 * (5888 + 3072))
    hand = gpt_oss_20b_bf16_outside_experts() + 24 * per_layer
    plan = serve(catalog_model("gpt-oss-20b"), gpu("rtx4090"), dtype="mxfp4", context=8192, layouts=False)
    assert plan.replica.weights_bytes_per_gpu == hand
    assert abs(hand / GIB - 13.7153) / 13.7153 < 0.01


def test_gpt_oss_20b_on_hopper_keeps_the_checkpoints_layout():
    """Hopper's Triton backend pads the intermediate size to 64 only (2880 stays) and keeps
    the biases in float32: the checkpoint's 17 bytes per 32 weights."""
    per_layer = 32 * ((5760 + 2880) * 90 * 17 + 4 * (5760 + 2880))
    hand = gpt_oss_20b_bf16_outside_experts() + 24 * per_layer
    plan = serve(catalog_model("gpt-oss-20b"), gpu("h100"), dtype="mxfp4", context=8192, layouts=False)
    assert plan.replica.weights_bytes_per_gpu == hand


def test_gpt_oss_loads_as_shipped_by_default():
    """vLLM loads gpt-oss in MXFP4 whatever the card (from compute capability 8.0): the
    default is the checkpoint's format, and the JSON says why. The model card: gpt-oss-120b
    "fits into a single 80GB GPU", gpt-oss-20b "within 16GB of memory"."""
    big = serve(catalog_model("gpt-oss-120b"), gpu("h100"), dtype=None, context=8192)
    assert (big.dtype, big.dtype_source) == ("mxfp4", "as_shipped") and big.fits
    assert big.replica.weights_bytes_per_gpu < 80e9
    small = serve(catalog_model("gpt-oss-20b"), gpu("rtx4090"), dtype=None, context=16384)
    assert (small.dtype, small.dtype_source) == ("mxfp4", "as_shipped") and small.fits
    assert small.replica.weights_bytes_per_gpu < 16e9  # with Marlin's padding: 13.7 GiB
    old = serve(catalog_model("gpt-oss-20b"), gpu("t4"), dtype=None, context=4096)
    # MXFP4 needs 8.0, and so does bfloat16: vLLM's --dtype auto serves a float16 copy
    assert (old.dtype, old.dtype_source) == ("float16", "shipped_not_run")
    dense = serve(catalog_model("llama-3-8b"), gpu("h100"), dtype=None, context=4096)
    assert (dense.dtype, dense.dtype_source) == ("bfloat16", "default")
    assert serve(catalog_model("deepseek-v3"), gpu("h200"), dtype=None, gpus=8, context=4096).dtype == "fp8-block128"


def test_cli_default_and_json_key():
    code, out, _ = run("serve", "gpt-oss-20b", "--gpu", "h100", "--context", "8192", "--json")
    data = json.loads(out)
    assert code == 0 and data["dtype"] == "mxfp4" and data["dtype_source"] == "as_shipped"
    code, out, _ = run("serve", "gpt-oss-20b", "--gpu", "h100", "--context", "8192", "--dtype", "bf16", "--json")
    data = json.loads(out)
    assert data["dtype"] == "bfloat16" and data["dtype_source"] == "given"


def test_nvfp4_llama_by_hand():
    """ModelOpt NVFP4 in vLLM: every linear layer as weight [out, in / 2] uint8, weight_scale
    [out, in / 16] float8 and two float32 scales; embeddings and head in bfloat16."""
    shapes = [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096), (4096, 14336), (4096, 14336), (14336, 4096)]
    layer_linear = sum(i * o for i, o in shapes)
    nvfp4 = sum(o * i // 2 + o * i // 16 + 8 for i, o in shapes)
    hand = 2 * (8_030_261_248 - 32 * layer_linear) + 32 * nvfp4
    model = catalog_model("llama-3-8b")
    from calculator.serving.engines import rotary_table_bytes

    plan = serve(model, gpu("h100"), dtype="nvfp4", context=8192, layouts=False)
    buffers = model.summary.buffer_bytes_at("bfloat16")  # the rotary inverse frequencies
    assert plan.replica.weights_bytes_per_gpu == hand + buffers + rotary_table_bytes(model.spec, model.config, 2)


@pytest.mark.parametrize("args,code,words_en,words_fr", [
    (("llama-3-8b", "--gpu", "v100-32gb", "--dtype", "nvfp4"), "serve_format_card", ("7.5", "7.0"), ("7.5", "capacité")),
    (("llama-3-8b", "--gpu", "t4", "--dtype", "mxfp4"), "serve_mxfp4_dense", ("experts",), ("experts",)),
    (("gpt-oss-20b", "--gpu", "t4", "--dtype", "mxfp4"), "serve_format_card", ("8.0", "7.5"), ("8.0", "7.5")),
    (("llama-3-8b", "--gpu", "b200", "--dtype", "nvfp4", "--engine", "sglang"), "serve_format_engine", ("vLLM only",),
     ("que sous vLLM",)),
    (("llama-3-8b", "--gpu", "h100", "--dtype", "bnb-nf4"), "serve_format", ("bnb-nf4", "torchao-int4"),
     ("bnb-nf4", "torchao-int4")),
])
def test_refusals_one_line_in_both_languages(args, code, words_en, words_fr):
    status, out, err = run("serve", *args)
    assert status == 2 and not out and len(err.strip().splitlines()) == 1
    assert all(w in err for w in words_en)
    model = catalog_model(args[0])
    options = dict(zip(args[1::2], args[2::2]))
    with pytest.raises(CalculatorError) as error:
        serve(model, gpu(options["--gpu"]), dtype=options["--dtype"], engine=options.get("--engine", "vllm"))
    assert error.value.code == code
    assert all(w in error.value.message("fr") for w in words_fr)


def test_parity_serving_memory_page_and_cli():
    """The serving chapter's memory calculator with mxfp4 weights: its answer's command line,
    run, prints the JSON the page computed."""
    from guide.widgets import serving_memory
    from tests.test_parity import cli_json

    model, card = catalog_model("gpt-oss-120b"), gpu("h100")
    plan = serve(model, card, engine="vllm", dtype="mxfp4", context=16384, users=4, tensor=1,
                 utilization=None, max_num_batched_tokens=8192, layouts=False)
    answer = serving_memory._answer(model, plan, None, 8192)
    assert "mxfp4" in answer.argv
    cli = cli_json("serve", *answer.argv)
    page = serve_json(model, serve(model, card, engine="vllm", dtype="mxfp4", context=16384, users=4, tensor=1,
                                   max_num_batched_tokens=8192))
    assert cli["weights_bytes_per_gpu"] == plan.replica.weights_bytes_per_gpu
    for key in ("dtype", "weights_bytes_per_gpu", "kv_tokens", "kv_blocks", "verdict"):
        assert cli[key] == page[key], key


def test_fp8_block128_differs_from_per_channel_float8_by_its_scales():
    """Block-wise float8 (fp8.py): a float32 scale per 128 x 128 block instead of vLLM's
    per-output-channel float32 scale of the plain float8 layout; the weights themselves are one
    byte each in both."""
    shapes = [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096), (4096, 14336), (4096, 14336), (14336, 4096)]
    blocks = sum(-(-i // 128) * -(-o // 128) for i, o in shapes)
    channels = sum(o for _, o in shapes)
    model, card = catalog_model("llama-3-8b"), gpu("h100")
    block = serve(model, card, dtype="fp8-block128", context=4096, layouts=False).replica.weights_bytes_per_gpu
    channel = serve(model, card, dtype="float8", context=4096, layouts=False).replica.weights_bytes_per_gpu
    assert block - channel == 32 * 4 * (blocks - channels)


def test_the_chapter_states_what_the_calculator_computes():
    """The serving chapter's paragraph on shipped formats: gpt-oss-120b's weights on an H100
    (Triton, the checkpoint's layout: the Hub's 60.8 GiB plus the rotary table and float32
    expert biases) and on an A100 (Marlin's padding), in both languages."""
    from pathlib import Path

    model = catalog_model("gpt-oss-120b")
    sizes = [serve(model, gpu(card), dtype=None, context=8192, layouts=False).replica.weights_bytes_per_gpu / GIB
             for card in ("h100", "a100-80gb")]
    assert abs(sizes[0] - 60.8) < 0.1
    root = Path(__file__).resolve().parents[1] / "content"
    english, french = (root / "en" / "serving.md").read_text(), (root / "fr" / "serving.md").read_text()
    for size in sizes:
        assert f"{size:.1f} GiB" in english and f"{size:.1f} Gio".replace(".", ",") in french


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_serving_page_prices_mxfp4_and_says_what_ships(lang):
    """The chapter's case on gpt-oss-20b: in bfloat16 the memory calculator says the checkpoint
    ships in mxfp4; with its own precision set to mxfp4 it prices it, without an error."""
    from tests.apptest import open_page

    at = open_page("serving", lang, model="gpt-oss-20b", gpu="h100", dtype="bfloat16")
    assert not at.exception, [e.value for e in at.exception]
    note = "ships in mxfp4" if lang == "en" else "livré en mxfp4"
    assert any(note in info.value for info in at.info)
    priced = open_page("serving", lang, model="gpt-oss-20b", gpu="h100", dtype="bfloat16", svm_dtype="mxfp4",
                       svg_dtype="nvfp4")
    assert not priced.exception, [e.value for e in priced.exception]
    assert not any(note in info.value for info in priced.info)  # priced as it ships: no note
    shown = " ".join(str(c.value) for c in priced.code)
    assert "--dtype mxfp4" in shown  # the memory calculator's paste-ready command


@pytest.mark.parametrize("lang,words", [("en", "ships in that format"), ("fr", "livré dans ce format")])
def test_the_markdown_answer_says_the_weights_are_as_shipped(lang, words):
    code, out, _ = run("serve", "gpt-oss-20b", "--gpu", "h100", "--context", "8192", "--markdown", "--lang", lang)
    assert code == 0 and words in out and "mxfp4" in out
    code, out, _ = run("serve", "gpt-oss-20b", "--gpu", "h100", "--context", "8192", "--dtype", "mxfp4",
                       "--markdown", "--lang", lang)
    assert code == 0 and words not in out  # asked for: nothing to explain
