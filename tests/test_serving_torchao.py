"""`serve` with torchao checkpoints in vLLM: vLLM's TorchAOConfig quantizes
every LinearBase layer with torchao's tensor subclasses (calculator/serving/weights.py has the
sources). Every figure below is worked out by hand from the model's shapes and torchao's
layouts: Int8Tensor, int8 [out, in] + float32 scale + int8 zero per row; Int4Tensor, [out, in / 2]
bytes + bfloat16 scale and zero per 128 inputs (9.0 and later); tinygemm's tile_packed_to_4d on
8.x, padded to 1,024 inputs and 8 outputs; a matrix whose inputs are not a multiple of 128 left
in bfloat16."""

from __future__ import annotations


import pytest

from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model, resolve_config
from calculator.serving.engines import rotary_table_bytes
from calculator.serving.plan import serve
from tests.cli_runner import run_cli

LLAMA_3_8B = 8_030_261_248  # parameters, Meta's model card
LLAMA_2_7B = 6_738_415_616  # parameters, Meta's model card
# (inputs, outputs) of one layer's q, k, v, o, gate, up and down projections
LLAMA_3_8B_LAYER = [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096), (4096, 14336), (4096, 14336),
                    (14336, 4096)]
LLAMA_2_7B_LAYER = [(4096, 4096)] * 4 + [(4096, 11008), (4096, 11008), (11008, 4096)]
# SmolLM-360M's shapes: a width of 960 is not a multiple of 128
SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 960, "intermediate_size": 2560,
         "num_hidden_layers": 32, "num_attention_heads": 15, "num_key_value_heads": 5, "vocab_size": 49152,
         "max_position_embeddings": 2048, "tie_word_embeddings": True, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}


def weights(model, card: str, dtype: str, tensor: int = 1) -> int:
    return serve(model, gpu(card), dtype=dtype, tensor=tensor, context=2048, layouts=False).replica.weights_bytes_per_gpu


def outside_linears(model, params: int, layer: list[tuple[int, int]]) -> int:
    """bfloat16 embeddings, head and norms, the rotary buffers and vLLM's cos/sin table."""
    linear = model.spec.layers * sum(i * o for i, o in layer)
    return 2 * (params - linear) + model.summary.buffer_bytes_at("bfloat16") + \
        rotary_table_bytes(model.spec, model.config, 2)


def test_int4_on_hopper_llama_3_8b_by_hand():
    """Every projection's inputs (4096, 14336) are multiples of 128: half a byte per weight,
    then 2 + 2 bytes (scale, zero) per 128 inputs of each row."""
    model = catalog_model("llama-3-8b")
    int4 = sum(o * i // 2 + 4 * (i // 128) * o for i, o in LLAMA_3_8B_LAYER)
    assert weights(model, "h100", "torchao-int4") == outside_linears(model, LLAMA_3_8B, LLAMA_3_8B_LAYER) + 32 * int4


def test_int8_on_ada_llama_3_8b_by_hand():
    """One byte per weight, and per output row a float32 scale and an int8 zero point."""
    model = catalog_model("llama-3-8b")
    int8 = sum(o * i + 5 * o for i, o in LLAMA_3_8B_LAYER)
    assert weights(model, "l4", "torchao-int8") == outside_linears(model, LLAMA_3_8B, LLAMA_3_8B_LAYER) + 32 * int8


def test_int4_on_ampere_pads_for_tinygemm():
    """Llama-2-7B's down projection takes 11,008 inputs: tinygemm pads them to 11,264 on an
    A100; on an H100 the plain layout keeps 11,008 (86 groups of 128, against 88)."""
    model = catalog_model("llama-2-7b")
    hopper = sum(o * i // 2 + 4 * (i // 128) * o for i, o in LLAMA_2_7B_LAYER)
    padded = [(-(-i // 1024) * 1024, o) for i, o in LLAMA_2_7B_LAYER]
    ampere = sum(o * i // 2 + 4 * (i // 128) * o for i, o in padded)
    rest = outside_linears(model, LLAMA_2_7B, LLAMA_2_7B_LAYER)
    assert weights(model, "h100", "torchao-int4") == rest + 32 * hopper
    assert weights(model, "a100-80gb", "torchao-int4") == rest + 32 * ampere
    assert 32 * (ampere - hopper) == 32 * (4096 * 256 // 2 + 4 * 2 * 4096)


def test_int4_pads_each_ranks_slice():
    """Split over two GPUs, each rank's down projection takes 5,504 inputs (43 groups): tinygemm
    pads the slice to 6,144 (48 groups); the other projections are multiples of 1,024 per rank."""
    model = catalog_model("llama-2-7b")
    extra = 4096 * (6144 - 5504) // 2 + 4 * (48 - 43) * 4096
    assert weights(model, "a100-80gb", "torchao-int4", 2) - weights(model, "h100", "torchao-int4", 2) == 32 * extra


def test_int4_leaves_matrices_off_the_group_in_bfloat16():
    """With a width of 960, q, k, v, o, gate and up are left in bfloat16 by torchao; only the
    down projection (2,560 inputs, 20 groups) is int4, padded to 3,072 inputs on an A100."""
    model = resolve_config(SMALL, "smollm-like")
    bf16 = weights(model, "h100", "bfloat16")
    down = 2 * 2560 * 960
    assert bf16 - weights(model, "h100", "torchao-int4") == 32 * (down - (960 * 2560 // 2 + 4 * 20 * 960))
    assert bf16 - weights(model, "a100-80gb", "torchao-int4") == 32 * (down - (960 * 3072 // 2 + 4 * 24 * 960))
    int8 = sum(o * i + 5 * o for i, o in [(960, 960), (960, 320), (960, 320), (960, 960), (960, 2560), (960, 2560),
                                          (2560, 960)])
    linear = sum(2 * i * o for i, o in [(960, 960), (960, 320), (960, 320), (960, 960), (960, 2560), (960, 2560),
                                        (2560, 960)])
    assert bf16 - weights(model, "h100", "torchao-int8") == 32 * (linear - int8)


@pytest.mark.parametrize("args,code,words_en,words_fr", [
    (("llama-3-8b", "--gpu", "t4", "--dtype", "torchao-int4"), "serve_format_card", ("8.0", "7.5"), ("8.0", "7.5")),
    (("llama-3-8b", "--gpu", "v100-32gb", "--dtype", "torchao-int8"), "serve_format_card", ("7.5", "7.0"),
     ("7.5", "capacité")),
    (("qwen3-30b-a3b", "--gpu", "h100", "--dtype", "torchao-int4"), "serve_torchao_moe", ("mixture of experts",),
     ("mélange d'experts",)),
    (("llama-3-8b", "--gpu", "mi300x", "--dtype", "torchao-int8"), "serve_format_maker", ("NVIDIA",), ("NVIDIA",)),
    (("llama-3-8b", "--gpu", "h100", "--dtype", "torchao-int8", "--engine", "sglang"), "serve_format_engine",
     ("vLLM only",), ("que sous vLLM",)),
])
def test_refusals_one_line_in_both_languages(args, code, words_en, words_fr):
    done = run_cli("serve", *args)
    status, out, err = done.returncode, done.stdout, done.stderr
    assert status == 2 and not out and len(err.strip().splitlines()) == 1
    assert all(w in err for w in words_en)
    options = dict(zip(args[1::2], args[2::2]))
    with pytest.raises(CalculatorError) as error:
        serve(catalog_model(args[0]), gpu(options["--gpu"]), dtype=options["--dtype"],
              engine=options.get("--engine", "vllm"))
    assert error.value.code == code
    assert all(w in error.value.message("fr") for w in words_fr)


def test_the_chapter_states_the_padding_the_calculator_applies():
    """The serving chapter's torchao paragraph, in both languages: tinygemm's padding of
    Llama-2-7B's down projection, whole and per GPU over two, as weights.py pads it."""
    from pathlib import Path

    from calculator.serving.weights import TINYGEMM_PADDING, _round_up

    whole, per_gpu = _round_up(11008, TINYGEMM_PADDING[0]), _round_up(11008 // 2, TINYGEMM_PADDING[0])
    assert (whole, per_gpu) == (11264, 6144)
    root = Path(__file__).resolve().parents[1] / "content"
    english, french = (" ".join((root / lang / "serving.md").read_text().split()) for lang in ("en", "fr"))
    assert f"11,008 inputs become {whole:,}" in english and f"5,504 become {per_gpu:,}" in english
    assert "11 008 entrées deviennent 11 264" in french and "5 504 deviennent 6 144" in french


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_serving_page_offers_and_prices_torchao(lang):
    """Both calculators of the chapter that set their own precision take torchao-int4 and
    torchao-int8; the memory calculator's command prices the format the page shows."""
    from tests.apptest import open_page

    at = open_page("serving", lang, model="llama-2-7b", gpu="a100-80gb", dtype="bfloat16", context="4096",
                   svm_dtype="torchao-int4", svg_dtype="torchao-int8")
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    shown = " ".join(str(c.value) for c in at.code)
    assert "--dtype torchao-int4" in shown
    captions = " ".join(c.value for c in at.caption)
    assert "torchao-int8" in captions and "TorchAoConfig" in captions


def shipped(fmt_config: dict) -> dict:
    from calculator.models import catalog

    return {**catalog.config("llama-3.1-8b"), "quantization_config": fmt_config}


INT4_CHECKPOINT = {"quant_method": "torchao", "quant_type": {"default": {
    "_type": "Int4WeightOnlyConfig", "_version": 2, "_data": {"group_size": 128}}}}


def test_a_torchao_checkpoint_is_served_as_it_ships_where_the_engine_runs_it():
    """A checkpoint saved by TorchAoConfig (its quantization_config as transformers 5 writes it)
    is priced as it ships on an H100, and where vLLM does not run the format (torchao int4
    below compute capability 8.0) the answer prices the copy vLLM's --dtype auto would serve
    (float16 on a T4, which has no bfloat16 either) and says why."""
    model = resolve_config(shipped(INT4_CHECKPOINT), "int4.json")
    on_h100 = serve(model, gpu("h100"), dtype=None, context=2048, layouts=False)
    assert (on_h100.dtype, on_h100.dtype_source) == ("torchao-int4", "as_shipped")
    assert on_h100.replica.weights_bytes_per_gpu == weights(model, "h100", "torchao-int4")
    on_t4 = serve(model, gpu("t4"), dtype=None, context=2048, layouts=False)
    assert (on_t4.dtype, on_t4.dtype_source) == ("float16", "shipped_not_run")
    assert on_t4.replica.weights_bytes_per_gpu == weights(model, "t4", "float16")


@pytest.mark.parametrize("lang,words", [("en", "ships in mxfp4, which the engine does not run on the NVIDIA T4"),
                                        ("fr", "livré en mxfp4, que le moteur n'exécute pas sur le NVIDIA T4")])
def test_gpt_oss_on_a_t4_says_its_mxfp4_does_not_run_there(lang, words):
    """vLLM's MXFP4 kernels start at compute capability 8.0: on a T4, `serve` without --dtype
    prices the copy its --dtype auto serves there (float16: no bfloat16 below 8.0 either), and
    the JSON, the text and the Markdown answer say why."""
    import json

    data = json.loads(run_cli("serve", "gpt-oss-20b", "--gpu", "t4", "--json").stdout)
    assert (data["dtype"], data["dtype_source"], data["shipped_format"]) == ("float16", "shipped_not_run", "mxfp4")
    assert "dtype_fallback" not in data  # its config names no dtype: float32 to vLLM, served in float16 anyway
    assert "compute capability 8.0" in data["shipped_refusal"]
    assert "ships in mxfp4, which this engine does not run here" in run_cli("serve", "gpt-oss-20b", "--gpu", "t4").stdout
    answer = run_cli("serve", "gpt-oss-20b", "--gpu", "t4", "--markdown", "--lang", lang).stdout
    assert words in " ".join(answer.split())


@pytest.mark.parametrize("lang,words", [("en", "ships in mxfp4, which vLLM does not run on this card"),
                                        ("fr", "livré en mxfp4, que vLLM n'exécute pas sur cette carte")])
def test_the_serving_page_warns_that_the_shipped_format_does_not_run_on_the_card(lang, words):
    from tests.apptest import open_page

    at = open_page("serving", lang, model="gpt-oss-20b", gpu="t4", context="4096")
    assert not at.exception, [e.value for e in at.exception]  # (a T4 does not hold it: errors say so)
    warnings = " ".join(w.value for w in at.warning)
    assert words in warnings and "8.0" in warnings
