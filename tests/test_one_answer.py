"""One answer per question: the serving page, its "Copy as answer", the MCP tool and `serve`
take the precision from one engine function (calculator.serving.weights.default_weights)
when none is asked for; an explicit precision in a link wins."""

from __future__ import annotations

import pytest

from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.serving.plan import serve
from guide.case import Case, serving_dtype
from guide.chapters import by_slug
from guide.format import format_bytes
from tests.apptest import open_page
from tests.test_parity import cli_json


def test_the_serving_case_takes_the_engines_precision_when_the_url_names_none():
    serving = by_slug("serving").defaults
    oss, llama, card = catalog_model("gpt-oss-20b"), catalog_model("llama-3.1-8b"), gpu("h100")
    assert serving_dtype(serving, (), oss, card)[0].dtype == "mxfp4"
    assert serving_dtype(serving, (), oss, card)[1] == "as_shipped"
    assert serving_dtype(serving, (), llama, card)[1] == "default"
    # MXFP4 needs 8.0 in vLLM, and so does bfloat16: its --dtype auto serves the copy in float16
    assert serving_dtype(serving, (), oss, gpu("v100-32gb"))[0].dtype == "float16"
    given = Case(dtype="bfloat16", dtype_as_shipped=True)
    assert serving_dtype(given, ("dtype",), oss, card) == (given, "given")  # the link's precision wins
    assert serving_dtype(Case(), (), oss, card)[0].dtype == "bfloat16"  # other chapters: their own default


def _pool(model: str, card: str, dtype: str | None, lang: str) -> str:
    plan = serve(catalog_model(model), gpu(card), dtype=dtype, context=8192, users=32, layouts=False)
    return format_bytes(plan.replica.kv_pool_bytes_per_gpu, lang)


@pytest.mark.parametrize("lang,words", [("en", "priced as the checkpoint ships"), ("fr", "tels que le checkpoint est livré")])
def test_the_serving_page_prices_gpt_oss_as_serve_does(lang, words):
    """No precision in the link: the bar shows mxfp4, the calculators price mxfp4 (the pool
    `serve` without --dtype gives), say so, and the paste-ready command leaves --dtype out."""
    at = open_page("serving", lang, model="gpt-oss-20b", gpu="h100")
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="case_dtype").value == "mxfp4"
    values = [m.value for m in at.metric]
    assert _pool("gpt-oss-20b", "h100", None, lang) in values
    assert _pool("gpt-oss-20b", "h100", "bfloat16", lang) not in values
    assert any(words in info.value for info in at.info)
    commands = [line for c in at.code for line in str(c.value).splitlines() if "calculator serve" in line]
    assert commands and not any("--dtype" in line for line in commands), commands


def test_a_precision_in_the_link_wins():
    at = open_page("serving", "en", model="gpt-oss-20b", gpu="h100", dtype="bfloat16")
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="case_dtype").value == "bfloat16"
    values = [m.value for m in at.metric]
    assert _pool("gpt-oss-20b", "h100", "bfloat16", "en") in values
    assert _pool("gpt-oss-20b", "h100", None, "en") not in values


def test_copy_as_answer_and_mcp_give_the_commands_answer():
    """The memory calculator's answer with no precision asked: its command, run, prints the
    same JSON (dtype_source included); the MCP tool's link names the precision `serve` chose."""
    from calculator.cli.mcp_tools import call
    from guide.widgets import serving_memory

    model, card = catalog_model("gpt-oss-20b"), gpu("h100")
    plan = serve(model, card, engine="vllm", dtype=None, context=8192, users=32, max_num_batched_tokens=8192,
                 layouts=False)
    answer = serving_memory._answer(model, plan, None, 8192)
    assert "--dtype" not in answer.argv
    cli = cli_json("serve", *answer.argv)
    assert (cli["dtype"], cli["dtype_source"]) == ("mxfp4", "as_shipped")
    assert cli["kv_tokens"] == plan.replica.kv_tokens
    tool = call("serve", {"model": "gpt-oss-20b", "gpu": "h100", "context": 8192})
    assert tool["dtype_source"] == "as_shipped" and "dtype=mxfp4" in tool["guide_link"]


# The home page's quick check prices a format as `estimate --dtypes` does --------------------

@pytest.mark.parametrize("model,dtype", [("gpt-oss-20b", "mxfp4"), ("llama-3.1-8b", "bnb-nf4"),
                                         ("llama-3.1-8b", "Q4_K"), ("llama-3.1-8b", "fp8-block128")])
def test_the_quick_check_prices_a_format_as_estimate_does(model, dtype):
    from tests.test_parity import page_inputs
    from guide.widgets import quick_check

    cli = cli_json("estimate", model, "--dtypes", dtype, "--gpu", "rtx4090")["rows"][0]
    page = quick_check.answer_for(page_inputs("", model, "rtx4090", dtype=dtype))
    assert (page.verdict, page.figures["total_bytes"]) == (cli["verdict"], cli["total_bytes"])
    assert page.figures["total_bytes"] < 0.6 * catalog_model(model).summary.parameters * 2  # not bfloat16's


def test_gpt_oss_mxfp4_by_hand():
    """gpt-oss-20b as it ships, from its config: the experts' matrices in MXFP4 blocks (32
    four-bit values and one byte of scale: 17 bytes per 32 weights), the rest in bfloat16."""
    from guide.widgets import quick_check
    from tests.test_parity import page_inputs

    model = catalog_model("gpt-oss-20b")
    c = model.config
    expert_weights = c["num_hidden_layers"] * c["num_local_experts"] * 3 * c["hidden_size"] * c["intermediate_size"]
    others = model.summary.parameters - expert_weights
    by_hand = expert_weights * 17 // 32 + others * 2
    answer = quick_check.answer_for(page_inputs("", "gpt-oss-20b", "h100", dtype="mxfp4"))
    assert abs(answer.figures["total_bytes"] - by_hand) / by_hand < 0.001, (answer.figures["total_bytes"], by_hand)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_home_page_reads_a_format_from_the_link(lang):
    at = open_page("", lang, model="gpt-oss-20b", gpu="rtx4090", dtype="mxfp4")
    assert not at.exception, [e.value for e in at.exception]
    shipped = format_bytes(cli_json("estimate", "gpt-oss-20b", "--dtypes", "mxfp4")["rows"][0]["total_bytes"], lang)
    assert at.metric[1].value == shipped
    assert at.success, [e.value for e in at.error]  # 12.8 GiB loads on a 24 GB card; bfloat16 (39 GiB) would not


# `inference --measured` on a T4 computes in float16, as `speed` and the slow-model page -----

def test_inference_on_a_t4_prices_float16_as_speed_does():
    """A T4 (compute capability 7.5) has no bfloat16 tensor cores: with no --dtype, `inference`
    computes in float16 and says so; its measured ceiling is `speed`'s, not bfloat16's."""
    from calculator.memory.workload_speed import workload_speed
    from calculator.memory.workloads import Shape

    args = ("inference", "qwen2.5-0.5b", "--gpu", "t4", "--batch", "4", "--prompt", "512", "--new-tokens", "128",
            "--measured", "100")
    data = cli_json(*args)
    assert data["dtype"] == "float16"
    assert {"id": "compute_dtype", "value": {"dtype": "float16", "reason": "no_bf16_tensor_cores", "gpu": "t4"}} \
        in data["assumptions"]
    model, card = catalog_model("qwen2.5-0.5b"), gpu("t4")
    run = Shape("generation", "generate", 512, 128)
    half = workload_speed(model.summary, model.spec, card, "float16", 4, run).ceiling
    brain = workload_speed(model.summary, model.spec, card, "bfloat16", 4, run).ceiling
    assert data["measured"]["ceiling"] == pytest.approx(half) and half > 1.05 * brain
    speed = cli_json("speed", "qwen2.5-0.5b", "--gpu", "t4", "--batches", "4", "--prompt", "512", "--new-tokens", "128")
    assert speed["rows"][0]["dtype"] == data["dtype"]
    asked = cli_json(*args, "--dtype", "bfloat16")  # asked for: priced as asked
    assert asked["dtype"] == "bfloat16" and asked["measured"]["ceiling"] == pytest.approx(brain)
    on_l4 = cli_json("inference", "qwen2.5-0.5b", "--gpu", "l4", "--batch", "4", "--prompt", "512")
    assert on_l4["dtype"] == "bfloat16"


@pytest.mark.parametrize("lang,words", [("en", "no bfloat16 tensor cores"), ("fr", "pas de tensor cores bfloat16")])
def test_the_inference_answer_says_the_cards_precision(lang, words):
    from tests.test_serving_formats import run

    code, out, _ = run("inference", "qwen2.5-0.5b", "--gpu", "t4", "--batch", "4", "--prompt", "512",
                       "--markdown", "--lang", lang)
    assert code == 0 and words in out


def test_the_slow_model_page_measures_against_the_same_ceiling():
    """The batch-size calculator on a T4, with a measured speed: the share it states is the one
    `inference --measured` prints (float16 on both sides)."""
    from guide.format import format_number

    at = open_page("slow-model", "en", model="qwen2.5-0.5b", gpu="t4", batch="4", prompt="512", new_tokens="128",
                   bs_measured="100")
    assert not at.exception, [e.value for e in at.exception]
    data = cli_json("inference", "qwen2.5-0.5b", "--gpu", "t4", "--batch", "4", "--prompt", "512", "--new-tokens",
                    "128", "--measured", "100")
    ceiling = format_number(data["measured"]["ceiling"], 1, "en")
    assert any(f"({ceiling} " in info.value for info in at.info), [i.value for i in at.info]


# SGLang on the serving page prices what `serve --engine sglang` prices ----------------------

@pytest.mark.parametrize("lang,words", [("en", "as `serve --engine sglang` without"),
                                        ("fr", "comme `serve --engine sglang` sans")])
@pytest.mark.parametrize("engine_key", ["svm_engine", "svg_engine", "sve_engine"])
def test_sglang_on_the_serving_page_prices_what_serve_sglang_prices(lang, words, engine_key):
    """On an MI300X the bar shows vLLM's mxfp4 while SGLang runs gpt-oss's mxfp4 on NVIDIA cards
    only: the SGLang calculators take `serve --engine sglang`'s own choice (no --dtype: the same
    engine function) and say that it differs from the bar."""
    at = open_page("serving", lang, model="gpt-oss-20b", gpu="mi300x", **{engine_key: "sglang"})
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="case_dtype").value == "mxfp4"
    cli = cli_json("serve", "gpt-oss-20b", "--gpu", "mi300x", "--engine", "sglang", "--context", "8192")
    assert cli["dtype"] != "mxfp4" and cli["dtype_source"] == "shipped_not_run"
    weights = format_bytes(cli["weights_bytes_per_gpu"], lang)
    if engine_key == "svg_engine":  # the GPU-count calculator: a table, one layout a row
        assert any(weights in str(frame.value.to_dict()) for frame in at.dataframe)
    elif engine_key == "sve_engine":  # the settings calculator: the weights per GPU
        assert weights in [m.value for m in at.metric]
    else:  # the memory calculator: the pool (the vLLM pool in mxfp4 is another figure)
        assert format_bytes(cli["kv_pool_bytes_per_gpu"], lang) in [m.value for m in at.metric]
    notes = [info.value for info in at.info if words in info.value]
    assert len(notes) == 1 and cli["dtype"] in notes[0] and "mxfp4" in notes[0], [i.value for i in at.info]


def test_no_engine_note_when_sglang_is_asked_a_precision():
    at = open_page("serving", "en", model="gpt-oss-20b", gpu="h100", dtype="bfloat16", svm_engine="sglang")
    assert not at.exception, [e.value for e in at.exception]
    assert not any("serve --engine sglang" in info.value for info in at.info)
