"""transformers over several GPUs with the case's format (serving#multi-gpu-inference,
`multi-gpu --dtype`): gpt-oss's MXFP4 experts priced as transformers 5.24's quantizer keeps
them (dequantized to bfloat16 below compute capability 7.5), the tensor-parallel plan left
out for a format, GGUF refused in one sentence; the page and the CLI give one answer."""

from __future__ import annotations

import pytest

from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.serving.plan import transformers_multi_gpu
from guide.format import format_bytes
from tests.apptest import open_page
from tests.test_parity import cli_json
from tests.test_serving_formats import run


def test_mxfp4_over_two_gpus_by_hand():
    """gpt-oss-20b from its config: the experts' matrices in MXFP4 blocks (17 bytes per 32
    weights: 16 of packed nibbles and one E8M0 scale), the rest in bfloat16; device_map's
    stages hold that whole, the tensor-parallel plan is left out."""
    model = catalog_model("gpt-oss-20b")
    c = model.config
    experts = c["num_hidden_layers"] * c["num_local_experts"] * 3 * c["hidden_size"] * c["intermediate_size"]
    by_hand = experts * 17 // 32 + (model.summary.parameters - experts) * 2
    result = transformers_multi_gpu(model, gpu("l4"), 2, "mxfp4")
    assert abs(sum(result.device_map_weights) - by_hand) / by_hand < 0.002, (sum(result.device_map_weights), by_hand)
    assert (result.weights_dtype, result.weights_source, result.no_tensor_parallel) == ("mxfp4", "as_asked", "format")
    assert result.tp_weights_bytes is None
    plain = transformers_multi_gpu(model, gpu("l4"), 2, "bfloat16")
    assert max(result.device_map_weights) < 0.4 * max(plain.device_map_weights)


@pytest.mark.parametrize("card,held", [("t4", "mxfp4"), ("v100-32gb", "bfloat16"), ("p100", "bfloat16")])
def test_mxfp4_is_dequantized_below_compute_capability_7_5(card, held):
    """quantizer_mxfp4.validate_environment: compute_capability >= (7, 5) keeps MXFP4; a V100
    (7.0) or a P100 (6.0) gets bfloat16 weights."""
    data = cli_json("multi-gpu", "gpt-oss-20b", "--gpu", card, "--gpus", "2", "--dtype", "mxfp4")
    assert data["weights_dtype"] == held and data["dtype"] == "mxfp4"
    plain = cli_json("multi-gpu", "gpt-oss-20b", "--gpu", card, "--gpus", "2", "--dtype", "bfloat16")
    same = data["device_map"]["weights_bytes"] == plain["device_map"]["weights_bytes"]
    assert same == (held == "bfloat16")
    assert data["weights_source"] == ("dequantized" if held == "bfloat16" else "as_asked")


@pytest.mark.parametrize("lang,words", [("en", "GGUF"), ("fr", "GGUF")])
def test_gguf_and_integers_are_refused_in_one_line(lang, words):
    status, out, err = run("multi-gpu", "gpt-oss-20b", "--gpu", "l4", "--dtype", "Q4_K")
    assert status == 2 and not out and len(err.strip().splitlines()) == 1 and "Q4_K" in err
    with pytest.raises(CalculatorError) as error:
        transformers_multi_gpu(catalog_model("llama-3.1-8b"), gpu("l4"), 2, "int4")
    assert error.value.code == "multi_gpu_dtype" and words in error.value.message(lang)


@pytest.mark.parametrize("lang,words", [("en", "priced here for float32, float16 and bfloat16 only"),
                                        ("fr", "n'est chiffré ici qu'en float32, float16 et bfloat16")])
def test_the_page_prices_the_cases_mxfp4_as_multi_gpu_does(lang, words):
    """The serving page with gpt-oss and no precision: the bar says mxfp4, and the multi-GPU
    calculator's fullest GPU is `multi-gpu --dtype mxfp4`'s, not bfloat16's."""
    at = open_page("serving", lang, model="gpt-oss-20b", gpu="l4", svt_gpus="2")
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="case_dtype").value == "mxfp4"
    cli = cli_json("multi-gpu", "gpt-oss-20b", "--gpu", "l4", "--gpus", "2", "--dtype", "mxfp4",
                   "--batch", "32", "--context", "8192")
    plain = cli_json("multi-gpu", "gpt-oss-20b", "--gpu", "l4", "--gpus", "2", "--dtype", "bfloat16",
                     "--batch", "32", "--context", "8192")
    tables = " ".join(str(frame.value.to_dict()) for frame in at.dataframe)
    assert format_bytes(cli["device_map"]["peak_bytes"], lang) in tables
    assert format_bytes(plain["device_map"]["peak_bytes"], lang) not in tables
    assert any(words in info.value for info in at.info), [i.value for i in at.info]


@pytest.mark.parametrize("lang,fmt_words,deq_words", [
    ("en", "priced for float32, float16 and bfloat16 only", "dequantizes them to bfloat16"),
    ("fr", "n'est chiffré qu'en float32, float16 et bfloat16", "les déquantifie en bfloat16")])
def test_the_answer_says_why_in_both_languages(lang, fmt_words, deq_words):
    """`multi-gpu --markdown`: a format leaves the tensor-parallel plan out for that reason (not
    the heads'); below 7.5 the answer names bfloat16 and says transformers dequantizes."""
    code, out, _ = run("multi-gpu", "gpt-oss-20b", "--gpu", "l4", "--dtype", "mxfp4", "--markdown", "--lang", lang)
    assert code == 0 and fmt_words in out and "64" not in out.split("\n")[0]
    code, out, _ = run("multi-gpu", "gpt-oss-20b", "--gpu", "v100-32gb", "--dtype", "mxfp4", "--markdown",
                       "--lang", lang)
    assert code == 0 and deq_words in out and "bfloat16" in out.split("\n")[0]
