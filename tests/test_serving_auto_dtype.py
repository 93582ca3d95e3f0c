"""vLLM's `--dtype auto` on each card (calculator/serving/auto_dtype.py, read from
vllm/config/model.py `_resolve_auto_dtype` and vllm/platforms/cuda.py `supported_dtypes`):
a bfloat16 checkpoint is served in float16 below compute capability 8.0 (T4, V100, P100), a
Gemma 3 there in float32 (vLLM refuses float16 for it); an explicit bfloat16 on such a card, or
float16 on such a model, stops vLLM at start, and `serve` says so in one line. The CLI, the JSON,
the Markdown answer and the serving page say which precision and why, in both languages."""

from __future__ import annotations

import json

import pytest

from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.serving.auto_dtype import auto_dtype, checkpoint_dtype, sglang_auto_dtype
from calculator.serving.plan import serve
from calculator.serving.weights import capability, dtype_fallback
from tests.cli_runner import run_cli

AMPERE, TURING, PASCAL = (8, 0), (7, 5), (6, 0)


@pytest.mark.parametrize("config,card,expected", [
    ({"model_type": "llama", "torch_dtype": "bfloat16"}, AMPERE, ("bfloat16", None)),
    ({"model_type": "llama", "torch_dtype": "bfloat16"}, TURING, ("float16", "no_bfloat16")),
    ({"model_type": "llama", "dtype": "bfloat16"}, PASCAL, ("float16", "no_bfloat16")),  # transformers 5's key
    ({"model_type": "llama", "torch_dtype": "float16"}, TURING, ("float16", None)),
    ({"model_type": "llama", "torch_dtype": "float32"}, AMPERE, ("bfloat16", None)),  # downcast to the preferred
    ({"model_type": "llama", "torch_dtype": "float32"}, TURING, ("float16", None)),
    ({"model_type": "llama"}, TURING, ("float16", None)),  # no dtype: float32 to vLLM
    ({"model_type": "gemma3", "torch_dtype": "bfloat16"}, TURING, ("float32", "no_bfloat16_nor_float16")),
    ({"model_type": "gemma3_text", "torch_dtype": "bfloat16"}, AMPERE, ("bfloat16", None)),
    ({"model_type": "gemma2", "torch_dtype": "float16"}, AMPERE, ("bfloat16", "float16_refused")),
    ({"model_type": "glm4", "torch_dtype": "float16"}, TURING, ("float32", "float16_refused")),
    ({"model_type": "llama", "torch_dtype": "bfloat16"}, None, ("bfloat16", None)),  # ROCm's Instinct cards
    ({"model_type": "gemma3", "text_config": {"torch_dtype": "bfloat16"}}, TURING,
     ("float32", "no_bfloat16_nor_float16")),  # the text config's dtype when the top names none
])
def test_auto_dtype_follows_vllms_rule(config, card, expected):
    assert auto_dtype(config, card) == expected


def test_the_checkpoint_dtype_is_read_as_vllm_reads_it():
    assert checkpoint_dtype({"torch_dtype": "half"}) == "float16"
    assert checkpoint_dtype({"dtype": None, "vision_config": {"dtype": "bfloat16"}}) == "bfloat16"
    assert checkpoint_dtype({"torch_dtype": "int8"}) == "float32"  # not a dtype vLLM names: as if none
    assert checkpoint_dtype(None) == "float32"


def test_the_cards_capabilities_decide():
    assert capability(gpu("t4")) == TURING and capability(gpu("p100")) == PASCAL
    assert capability(gpu("a100-80gb")) == AMPERE and capability(gpu("mi300x")) is None


def test_serve_prices_what_auto_serves():
    """Llama 3.1 8B on a T4: float16, the same bytes as bfloat16; Gemma 3 1B: float32, twice."""
    llama, gemma = catalog_model("llama-3.1-8b"), catalog_model("gemma-3-1b")
    on_t4 = serve(llama, gpu("t4"), dtype=None, context=4096, layouts=False)
    given = serve(llama, gpu("t4"), dtype="float16", context=4096, layouts=False)
    assert (on_t4.dtype, on_t4.dtype_source) == ("float16", "default")
    assert on_t4.replica.weights_bytes_per_gpu == given.replica.weights_bytes_per_gpu
    assert serve(llama, gpu("a100-80gb"), dtype=None, context=4096, layouts=False).dtype == "bfloat16"
    g_t4 = serve(gemma, gpu("t4"), dtype=None, context=4096, layouts=False)
    g_h100 = serve(gemma, gpu("h100"), dtype=None, context=4096, layouts=False)
    assert (g_t4.dtype, g_h100.dtype) == ("float32", "bfloat16")
    assert g_t4.replica.weights_bytes_per_gpu == pytest.approx(2 * g_h100.replica.weights_bytes_per_gpu, rel=0.01)


@pytest.mark.parametrize("config,expected", [
    ({"model_type": "llama", "torch_dtype": "bfloat16"}, "bfloat16"),
    ({"model_type": "llama", "torch_dtype": "float16"}, "float16"),
    ({"model_type": "gpt2", "torch_dtype": "float32"}, "float16"),  # downcast to float16, not the card's first
    ({"model_type": "llama"}, "float16"),  # no dtype named: read as float32
    ({"model_type": "gemma2", "torch_dtype": "float32"}, "bfloat16"),  # Gemma: bfloat16 instead
    ({"model_type": "gemma3_text", "dtype": "float32"}, "bfloat16"),
])
def test_sglang_auto_dtype_follows_its_rule(config, expected):
    """SGLang's `_get_and_verify_dtype` (python/sglang/srt/configs/model_config.py)."""
    assert sglang_auto_dtype(config) == expected


def test_sglang_serves_the_checkpoints_dtype_on_any_card_in_two_bytes():
    """No card check (a bfloat16 checkpoint on a T4 stays bfloat16, no fallback said); a float16
    checkpoint stays float16, a float32 one is served in float16, Gemma 2's in bfloat16: the
    weights are those of bfloat16 every time."""
    llama3, llama2, gemma2 = catalog_model("llama-3.1-8b"), catalog_model("llama-2-7b"), catalog_model("gemma-2-9b")
    on_t4 = serve(llama3, gpu("t4"), dtype=None, context=4096, layouts=False, engine="sglang")
    assert (on_t4.dtype, on_t4.dtype_source) == ("bfloat16", "default") and dtype_fallback(llama3, gpu("t4"), "sglang") is None
    for model, served in ((llama2, "float16"), (gemma2, "bfloat16")):
        auto = serve(model, gpu("a100-80gb"), dtype=None, context=4096, layouts=False, engine="sglang")
        given = serve(model, gpu("a100-80gb"), dtype="bfloat16", context=4096, layouts=False, engine="sglang")
        assert auto.dtype == served and auto.replica.weights_bytes_per_gpu == given.replica.weights_bytes_per_gpu
    assert serve(llama2, gpu("a100-80gb"), dtype=None, context=4096, layouts=False).dtype == "float16"  # vLLM too


@pytest.mark.parametrize("args,code,words_en,words_fr", [
    (("llama-3.1-8b", "--gpu", "t4", "--dtype", "bfloat16"), "serve_bfloat16_card",
     ("the NVIDIA T4 has 7.5", "--dtype float16"), ("le NVIDIA T4", "--dtype float16")),
    (("gemma-3-27b", "--gpu", "h100", "--dtype", "float16"), "serve_float16_model",
     ("refuses float16 for gemma3",), ("refuse le float16 pour les modèles gemma3",)),
])
def test_what_vllm_refuses_at_start_is_refused_in_one_line(args, code, words_en, words_fr):
    for lang, words in (("en", words_en), ("fr", words_fr)):
        out = run_cli("serve", *args, "--lang", lang)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert all(w in " ".join(out.stderr.split()) for w in words), out.stderr
    assert run_cli("serve", *args[:3], "--engine", "sglang", *args[3:]).returncode == 0  # SGLang: not followed


@pytest.mark.parametrize("lang,words", [
    ("en", "The checkpoint is in bfloat16, which the NVIDIA T4 does not run, and vLLM refuses float16 for gemma3"),
    ("fr", "Le checkpoint est en bfloat16, que le NVIDIA T4 n'exécute pas, et vLLM refuse le float16 pour les modèles gemma3")])
def test_the_answer_says_why_the_precision_is_not_the_checkpoints(lang, words):
    data = json.loads(run_cli("serve", "gemma-3-1b", "--gpu", "t4", "--json").stdout)
    assert data["dtype"] == "float32" and data["dtype_fallback"] == {
        "checkpoint": "bfloat16", "served": "float32", "reason": "no_bfloat16_nor_float16", "model_type": "gemma3_text"}
    assert "vLLM's --dtype auto serves it in float32" in run_cli("serve", "gemma-3-1b", "--gpu", "t4").stdout
    answer = " ".join(run_cli("serve", "gemma-3-1b", "--gpu", "t4", "--markdown", "--lang", lang).stdout.split())
    assert words in answer
    on_h100 = json.loads(run_cli("serve", "gemma-3-1b", "--gpu", "h100", "--json").stdout)
    assert "dtype_fallback" not in on_h100


@pytest.mark.parametrize("lang,words", [("en", "which this card does not run (vLLM needs compute capability 8.0"),
                                        ("fr", "que cette carte n'exécute pas (vLLM demande pour cela la capacité")])
def test_the_serving_page_says_it_too(lang, words):
    from tests.apptest import open_page

    at = open_page("serving", lang, model="llama-3.1-8b", gpu="t4", context="4096")
    assert not at.exception, [e.value for e in at.exception]
    notes = " ".join(i.value for i in at.info)
    assert words in notes and "float16" in notes
    assert at.selectbox(key="case_dtype").value == "float16"  # the bar names what every calculator prices


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_chapter_quotes_the_engines_figures(lang):
    """serving.md's Gemma 3 1B on a T4 example is what `serve` prices, in each language."""
    from guide.chapters import by_slug
    from guide.format import format_bytes

    gemma = catalog_model("gemma-3-1b")
    text = " ".join(by_slug("serving").content_path(lang).read_text().split())
    for card in ("t4", "h100"):
        plan = serve(gemma, gpu(card), dtype=None, context=4096, layouts=False)
        assert format_bytes(plan.replica.weights_bytes_per_gpu, lang).replace("\u202f", " ") in text.replace("\u202f", " ")
