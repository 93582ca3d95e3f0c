"""`estimate --dtypes` with quantization formats: each format's total and
largest layer from the model's shapes, pinned by hand-worked layouts and the published sizes
of gpt-oss's MXFP4 checkpoints."""

from __future__ import annotations

from contextlib import redirect_stderr, redirect_stdout
import io
import json

import pytest

from calculator.cli import main as cli
from calculator.core.errors import CalculatorError
from calculator.memory.estimate import rows_for
from calculator.memory.format_layers import units_in_format
from calculator.memory.quantization import quantize_model
from calculator.models.seam import catalog_model

GIB = 2**30


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def unit(model, fmt: str, name: str) -> int:
    return next(u.bytes for u in units_in_format(model.summary, model.spec, fmt) if u.name == name)


# gpt-oss ships its experts in MXFP4 ---------------------------------------------------------

def test_gpt_oss_20b_mxfp4_total_by_hand_and_against_the_checkpoint():
    """24 layers x 32 experts of gate_up 2880 -> 5760 and down 2880 -> 2880: each row of 2880
    inputs is 90 blocks of 16 bytes of E2M1 pairs + 1 E8M0 scale byte = 1,530 bytes; every other
    parameter in bfloat16; the rotary table's 256 bytes of buffers."""
    model = catalog_model("gpt-oss-20b")
    experts = 24 * 32 * (5760 + 2880)  # rows
    expert_bytes = experts * 90 * 17
    expert_params = 24 * 32 * (5760 + 2880) * 2880
    others = 20_914_757_184 - expert_params
    row = rows_for(model.summary, ["mxfp4"], model.spec)[0]
    assert row.total_bytes == expert_bytes + 2 * others + 256 == 13_761_265_024
    # the Hub's checkpoint: 12.8 GiB; the model card: "runs within 16 GB of memory"
    assert abs(row.total_bytes / GIB - 12.8) < 0.05 and row.total_bytes < 16e9
    assert row.training_adam_bytes is None and row.rule_of_thumb_bytes == -(-row.total_bytes * 11 // 10)


def test_gpt_oss_20b_mxfp4_layers_by_hand():
    """A decoder layer: its 32 experts in MXFP4 (32 x (5760 + 2880) rows x 1,530 bytes), the
    other 26,924,576 parameters (attention, router, biases, sinks, norms) in bfloat16. The
    embeddings (201,088 x 2880, bfloat16) are larger: they are the largest layer."""
    model = catalog_model("gpt-oss-20b")
    layer = 32 * (5760 + 2880) * 1530 + 2 * (823_186_976 - 32 * (5760 + 2880) * 2880)
    assert unit(model, "mxfp4", "model.layers.7") == layer == 476_863_552
    row = rows_for(model.summary, ["mxfp4"], model.spec)[0]
    assert (row.largest_layer, row.largest_layer_bytes) == ("model.embed_tokens", 2 * 201_088 * 2880)


def test_gpt_oss_120b_mxfp4_against_the_checkpoint():
    """36 layers x 128 experts: the Hub's checkpoint is 60.8 GiB, and the model card says it
    runs on a single 80 GB GPU."""
    model = catalog_model("gpt-oss-120b")
    expert_params = 36 * 128 * (5760 + 2880) * 2880
    hand = expert_params * 17 // 32 + 2 * (model.summary.parameters - expert_params) + 256
    row = rows_for(model.summary, ["mxfp4"], model.spec)[0]
    assert row.total_bytes == hand
    assert abs(row.total_bytes / GIB - 60.8) < 0.1 and row.total_bytes < 80e9


# Dense models: NVFP4 and GGUF on Llama-3-8B -------------------------------------------------

LLAMA_LAYER = {  # name: (inputs, outputs)
    "q": (4096, 4096), "k": (4096, 1024), "v": (4096, 1024), "o": (4096, 4096),
    "gate": (4096, 14336), "up": (4096, 14336), "down": (14336, 4096)}


def test_llama_nvfp4_layer_by_hand():
    """NVFP4: per row, inputs / 16 blocks of 8 bytes + 1 FP8 scale byte; a float32 scale per
    matrix; the two norms (2 x 4096) stay in bfloat16. The head is not quantized: the
    embeddings and the head (128,256 x 4096 in bfloat16) tie for largest, the first one wins."""
    model = catalog_model("llama-3-8b")
    layer = sum(out * (inp // 16) * 9 + 4 for inp, out in LLAMA_LAYER.values()) + 2 * 2 * 4096
    assert unit(model, "nvfp4", "model.layers.0") == layer == 122_699_804
    row = rows_for(model.summary, ["nvfp4"], model.spec)[0]
    assert (row.largest_layer, row.largest_layer_bytes) == ("model.embed_tokens", 2 * 128_256 * 4096)


def test_llama_q4_k_head_is_the_largest_layer():
    """llama.cpp's Q4_K recipe: 144 bytes per 256 weights along each row, norms in float32,
    and the output matrix in Q6_K (210 bytes per 256): 128,256 rows x 16 blocks x 210 bytes."""
    model = catalog_model("llama-3-8b")
    layer = sum(out * (inp // 256) * 144 for inp, out in LLAMA_LAYER.values()) + 4 * 2 * 4096
    assert unit(model, "Q4_K", "model.layers.31") == layer
    assert unit(model, "Q4_K", "model.embed_tokens") == 128_256 * 16 * 144
    row = rows_for(model.summary, ["Q4_K"], model.spec)[0]
    assert (row.largest_layer, row.largest_layer_bytes) == ("lm_head", 128_256 * 16 * 210)


@pytest.mark.parametrize("name,fmt", [("gpt-oss-20b", "mxfp4"), ("llama-3-8b", "nvfp4"), ("qwen3-30b-a3b", "fp8-block128"),
                                      ("mixtral-8x7b-v0.1", "torchao-int4"), ("qwen3-8b", "bnb-nf4")])
def test_layers_add_up_to_the_total(name, fmt):
    """Where every quantized matrix sits in a repeated layer or the head, the layers' bytes add
    up to the format's total exactly (nothing counted twice or lost)."""
    model = catalog_model(name)
    units = units_in_format(model.summary, model.spec, fmt)
    assert sum(u.bytes for u in units) == quantize_model(model.summary, model.spec, fmt).total_bytes


def test_expert_layers_found_among_dense_ones():
    """DeepSeek-V3: 3 dense layers, then 58 with experts (14,848 expert matrices / 256
    experts). In fp8-block128 a layer with experts is 1 byte per weight plus its block scales:
    far above a dense layer, and the largest."""
    model = catalog_model("deepseek-v3")
    units = {u.name: u.bytes for u in units_in_format(model.summary, model.spec, "fp8-block128")}
    assert units["model.layers.3"] > 10 * units["model.layers.0"]
    assert units["model.layers.3"] == units["model.layers.60"]


# The command -------------------------------------------------------------------------------

def test_cli_estimate_takes_formats():
    code, out, _ = run("estimate", "gpt-oss-20b", "--dtypes", "mxfp4", "nvfp4", "bf16", "--gpu", "rtx4090", "--json")
    data = json.loads(out)
    assert code == 0 and [r["dtype"] for r in data["rows"]] == ["mxfp4", "nvfp4", "bfloat16"]
    mxfp4 = data["rows"][0]
    assert mxfp4["total_bytes"] == 13_761_265_024 and mxfp4["largest_layer"] == "model.embed_tokens"
    assert mxfp4["verdict"] in ("fits", "tight")  # 12.8 GiB on a 24 GB card
    assert data["rows"][2]["verdict"] == "too_big"  # 39 GiB in bfloat16
    code, out, _ = run("estimate", "gpt-oss-20b", "--dtypes", "mxfp4")
    assert code == 0 and "mxfp4" in out and "12.82 GiB" in out


def test_cli_refuses_an_unknown_precision_in_one_line():
    code, out, err = run("estimate", "gpt-oss-20b", "--dtypes", "mxfp5")
    assert code == 2 and not out and len(err.strip().splitlines()) == 1
    assert "mxfp5" in err and "mxfp4" in err and "bfloat16" in err


def test_a_format_without_shapes_is_refused_in_both_languages():
    model = catalog_model("llama-3-8b")
    with pytest.raises(CalculatorError) as error:
        rows_for(model.summary, ["bfloat16", "nvfp4"], None)
    assert error.value.code == "format_needs_shapes"
    assert "nvfp4" in error.value.message("en") and "safetensors" in error.value.message("en")
    assert "nvfp4" in error.value.message("fr") and "matrice" in error.value.message("fr")


def test_the_estimator_chapter_states_what_the_calculator_computes():
    """The estimator chapter's line on format rows: gpt-oss-20b in mxfp4, in both languages."""
    from pathlib import Path

    model = catalog_model("gpt-oss-20b")
    size = rows_for(model.summary, ["mxfp4"], model.spec)[0].total_bytes / GIB
    root = Path(__file__).resolve().parents[1] / "content"
    assert f"{size:.2f} GiB" in (root / "en" / "estimator.md").read_text()
    assert f"{size:.2f} Gio".replace(".", ",") in (root / "fr" / "estimator.md").read_text()


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_estimator_page_shows_format_rows(lang):
    from tests.apptest import open_page

    at = open_page("estimator", lang, es_model="gpt-oss-20b", es_dtypes="mxfp4")
    assert not at.exception and not at.error, [e.value for e in at.exception]
    total = "12.82 GiB" if lang == "en" else "12,82 Gio"
    rows = [frame.value for frame in at.dataframe if "mxfp4" in frame.value.iloc[:, 0].tolist()]
    assert rows and any(total in str(cell) for cell in rows[0].iloc[0])


def test_parity_estimator_page_and_cli():
    """The estimator's "Copy as answer" for format rows: its command line, run, prints the rows
    the page showed (total, largest layer, rule of thumb)."""
    from guide.inputs.estimate_table import estimate_answer
    from tests.test_parity import cli_json

    model = catalog_model("qwen3-30b-a3b")
    dtypes = ["bfloat16", "mxfp4", "nvfp4", "fp8-block128", "Q4_K"]
    answer = estimate_answer(model, dtypes)
    cli = cli_json("estimate", *answer.argv)
    page = rows_for(model.summary, dtypes, model.spec)
    for row, shown in zip(cli["rows"], page):
        assert (row["dtype"], row["total_bytes"], row["largest_layer"], row["largest_layer_bytes"],
                row["rule_of_thumb_bytes"]) == (shown.dtype, shown.total_bytes, shown.largest_layer,
                                                 shown.largest_layer_bytes, shown.rule_of_thumb_bytes)


def test_every_catalog_model_places_each_quantized_matrix_once():
    """Over the whole catalog (leaf layers as DistilBERT's, vision towers, encoder-decoders,
    dense layers before experts): no layer below zero, and the layers add up to the format's
    total within 1% (what a layer list leaves out of the model, as StarCoder's, aside)."""
    from calculator.models import catalog

    for entry in catalog.entries():
        model = catalog_model(entry.key)
        for fmt in ("mxfp4", "nvfp4", "fp8-block128", "bnb-nf4", "torchao-int4"):
            units = units_in_format(model.summary, model.spec, fmt)
            total = quantize_model(model.summary, model.spec, fmt).total_bytes
            assert min(u.bytes for u in units) >= 0, (entry.key, fmt)
            assert abs(sum(u.bytes for u in units) - total) <= 0.01 * total, (entry.key, fmt)
