"""SGLang with gpt-oss's MXFP4 experts: SGLang's mxfp4.py registers vLLM's
shapes, [E, 2 I', H' / 2] and [E, H', I' / 2] uint8 with one E8M0 byte per 32 inputs, and
biases that both of its CUDA backends turn to float32; I' is padded to 32 with triton_kernels
(what server_args picks for gpt-oss off data-centre Blackwell) and to 256, with H' to 256, with
FlashInfer on 10.x. Each figure below is worked out by hand from gpt-oss-20b's shapes (24
layers, 32 experts, I = H = 2,880)."""

from __future__ import annotations


import pytest

from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.serving.plan import serve
from tests.cli_runner import run_cli

LAYERS, EXPERTS, INTER, H = 24, 32, 2880, 2880
BF16_EXPERTS = LAYERS * EXPERTS * 2 * (2 * INTER * H + H * INTER + 2 * INTER + H)  # weights and the model's biases


def mxfp4(i_padded: int, h_padded: int, bias: int) -> int:
    """Every layer's experts: w13 then w2, each row its packed pairs, scales and bias."""
    w13 = 2 * i_padded * (h_padded // 2 + h_padded // 32 + bias)
    w2 = h_padded * (i_padded // 2 + i_padded // 32 + bias)
    return LAYERS * EXPERTS * (w13 + w2)


def sglang_weights(card: str, dtype: str | None, version: str | None = None) -> int:
    plan = serve(catalog_model("gpt-oss-20b"), gpu(card), engine="sglang", dtype=dtype, context=8192,
                 layouts=False, engine_version=version)
    return plan.replica.weights_bytes_per_gpu


@pytest.mark.parametrize("card", ["h100", "rtx4090", "a100-80gb"])
def test_triton_kernels_keep_the_checkpoints_shapes(card):
    """2,880 is a multiple of 32: no padding; the biases in float32. The rest of the model (and
    SGLang's allocator rounding, figured on the bfloat16 matrices) is the same in both."""
    assert sglang_weights(card, "bfloat16") - sglang_weights(card, "mxfp4") == BF16_EXPERTS - mxfp4(INTER, H, 4)


def test_flashinfer_on_b200_pads_both_sizes_to_256():
    """2,880 -> 3,072 for the intermediate and hidden sizes; biases in float32 (vLLM's FlashInfer
    backend keeps them in bfloat16: 2 bytes less per row)."""
    assert sglang_weights("b200", "bfloat16") - sglang_weights("b200", "mxfp4") == BF16_EXPERTS - mxfp4(3072, 3072, 4)
    vllm = serve(catalog_model("gpt-oss-20b"), gpu("b200"), dtype="mxfp4", context=8192, layouts=False)
    vllm_bf16 = serve(catalog_model("gpt-oss-20b"), gpu("b200"), dtype="bfloat16", context=8192, layouts=False)
    assert vllm_bf16.replica.weights_bytes_per_gpu - vllm.replica.weights_bytes_per_gpu == \
        BF16_EXPERTS - mxfp4(3072, 3072, 2)


def test_sglang_loads_gpt_oss_as_shipped_by_default():
    plan = serve(catalog_model("gpt-oss-20b"), gpu("h100"), engine="sglang", dtype=None, context=8192, layouts=False)
    assert (plan.dtype, plan.dtype_source) == ("mxfp4", "as_shipped")
    legacy = serve(catalog_model("gpt-oss-20b"), gpu("h100"), engine="sglang", dtype=None, context=8192,
                   layouts=False, engine_version="0.4.6")
    # 0.4.6 predates gpt-oss: SGLang's `auto` then reads its config, which names no dtype: float16
    assert (legacy.dtype, legacy.dtype_source) == ("float16", "shipped_not_run")


@pytest.mark.parametrize("args,code,words_en,words_fr", [
    (("--gpu", "h100", "--engine-version", "0.4.6"), "serve_format_version", ("0.4.6", "predates"),
     ("0.4.6", "antérieur")),
    (("--gpu", "mi300x"), "serve_format_maker", ("NVIDIA",), ("NVIDIA",)),
    (("--gpu", "t4"), "serve_format_card", ("8.0", "7.5"), ("8.0", "7.5")),
])
def test_refusals_one_line_in_both_languages(args, code, words_en, words_fr):
    done = run_cli("serve", "gpt-oss-20b", "--engine", "sglang", "--dtype", "mxfp4", *args)
    status, out, err = done.returncode, done.stdout, done.stderr
    assert status == 2 and not out and len(err.strip().splitlines()) == 1
    assert all(w in err for w in words_en)
    options = dict(zip(args[::2], args[1::2]))
    with pytest.raises(CalculatorError) as error:
        serve(catalog_model("gpt-oss-20b"), gpu(options["--gpu"]), engine="sglang", dtype="mxfp4",
              engine_version=options.get("--engine-version"))
    assert error.value.code == code
    assert all(w in error.value.message("fr") for w in words_fr)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_serving_page_prices_sglang_mxfp4(lang):
    """The memory calculator with SGLang and gpt-oss's own format: priced, no error, and its
    command runs the same figure through the CLI."""
    from tests.apptest import open_page

    at = open_page("serving", lang, model="gpt-oss-20b", gpu="h100", dtype="bfloat16", svm_dtype="mxfp4",
                   svm_engine="sglang", svt_batch="4")  # the multi-GPU section's own verdict stays out of it
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    shown = " ".join(str(c.value) for c in at.code)
    assert "--engine sglang" in shown and "--dtype mxfp4" in shown
