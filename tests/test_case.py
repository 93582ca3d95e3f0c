"""One case per page: the case travels in the URL under short stable names, every
calculator of a chapter starts from it, every link between chapters carries it, and a value
a page cannot use is refused with a notice while the chapter draws to its end."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import pytest

from calculator.core.gpus import gpu
from calculator.core.units import format_bytes
from guide import chapters
from guide.case import CASE_PARAMS, Case, parse_value, read_case, whole_number
from tests.apptest import fingerprint, open_own_case, open_page
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints

CASE = {"model": "mistral-7b-v0.1", "gpu": "a100-40gb", "dtype": "float16", "batch": "3", "prompt": "700",
        "new_tokens": "90", "sequence": "1536", "method": "qlora", "precision": "bfloat16", "optimizer": "sgd",
        "checkpointing": "none", "users": "12", "context": "2048", "tensor": "2", "workload": "forward",
        "items": "5000"}
WITH_CASE = [c for c in chapters.CHAPTERS if c.case]


def test_case_values_are_read_and_refused():
    case, refused, present = read_case({"gpu": ["4090"], "batch": ["inf"], "prompt": ["1e309"], "dtype": ["bf16"],
                                        "new_tokens": ["9" * 400], "model": ["Qwen/Qwen2.5-7B"]}, Case())
    assert (case.gpu, case.dtype, case.model) == ("rtx4090", "bfloat16", "qwen2.5-7b")
    assert (case.batch, case.prompt, case.new_tokens) == (Case().batch, Case().prompt, Case().new_tokens)
    assert sorted(r.param for r in refused) == ["batch", "new_tokens", "prompt"]
    assert set(present) == {"gpu", "batch", "prompt", "dtype", "new_tokens", "model"}
    for bad in ("inf", "-1", "0", "1e3", "nan", "12.5", "9" * 10, ""):
        with pytest.raises(ValueError):
            whole_number(bad, 10**8)
    assert whole_number("4096", 10**8) == 4096 and whole_number("8.0", 10**8) == 8
    assert parse_value("model", "someone/a-model") == "someone/a-model"
    with pytest.raises(ValueError):
        parse_value("model", "x" * 201)


@pytest.mark.parametrize("chapter", WITH_CASE, ids=lambda c: c.slug or "home")
def test_a_link_carrying_a_case_opens_the_chapter_on_it(chapter):
    case = {name: CASE[name] for name in chapter.case}
    default, filled = open_page(chapter.slug, "en"), open_page(chapter.slug, "fr", **case)
    assert not default.exception and not filled.exception, [e.value for e in filled.exception]
    assert fingerprint(filled) != fingerprint(open_page(chapter.slug, "fr"))
    # every case input shows the link's value
    values = {box.key.removeprefix("case_"): box.value for box in filled.selectbox if box.key and
              box.key.startswith("case_")}
    values.update({box.key.removeprefix("case_"): str(int(box.value)) for box in filled.number_input
                   if box.key and box.key.startswith("case_")})
    for name in chapter.case:
        assert str(values[name]) == case[name], name
    # and every link to another chapter carries it
    links = list(filled.main.get("page_link")) + list(filled.sidebar.get("page_link"))
    for link in links:
        query = parse_qs(link.proto.query_string)
        assert query["lang"] == ["fr"] and all(query[name] == [case[name]] for name in case), link.proto.label


def test_chapter_text_links_carry_the_case():
    at = open_page("oom", "en", model="mistral-7b-v0.1", gpu="4090")
    text = "\n".join(m.value for m in at.markdown)
    assert "(fine-tuning?lang=en&model=mistral-7b-v0.1&gpu=rtx4090" in text or \
           "?lang=en&model=mistral-7b-v0.1&gpu=rtx4090" in text


@pytest.mark.parametrize("lang", ("en", "fr"))
def test_bad_case_values_are_refused_and_the_chapter_draws(lang):
    at = open_page("oom", lang, batch="inf", prompt="1e309", new_tokens="9" * 400, gpu="nope", dtype="int3")
    assert not at.exception
    notices = [w.value for w in at.warning]
    for name in ("batch", "prompt", "new_tokens", "gpu", "dtype"):
        shown = name.replace("_", "\\_")  # markdown-escaped in the notice, drawn as typed
        assert any(shown in notice for notice in notices), name
    assert at.main.get("page_link"), "the chapter drew to its footer"


@pytest.mark.parametrize("chapter", [c for c in WITH_CASE if "model" in c.case], ids=lambda c: c.slug or "home")
def test_a_small_hub_model_runs_in_every_chapter(hub, chapter):
    """Any model, everywhere: a 3-layer model of 256 positions read from the (local) Hub, whose
    positions are shorter than every chapter's default lengths. Each calculator answers or says
    why in the reader's language; none stops the page."""
    from tests.conftest import load_test_config

    hub.add("someone/tiny-llama", {"config.json": load_test_config("tiny-llama")})
    at = open_page(chapter.slug, "fr", model="someone/tiny-llama")
    assert not at.exception, [e.message for e in at.exception]
    assert at.main.get("page_link"), "the chapter drew to its footer"
    assert at.selectbox(key="case_model").value == "someone/tiny-llama"
    assert not any("someone" in e.value for e in at.error), "the model was read"


def test_a_hub_model_that_cannot_be_read_leaves_the_default_and_says_so():
    at = open_page("oom", "fr", model="someone/unreachable")
    errors = [e.value for e in at.error]
    assert any("someone/unreachable" in e for e in errors)
    assert any("Llama-3.1-8B" in c.value for c in at.caption)
    assert not at.exception


def test_a_calculator_may_change_the_case_for_itself_only():
    at = open_page("oom", "en", cm_gpu="NVIDIA H100 SXM")
    boxes = {box.key: box for box in at.selectbox}
    assert boxes["cm_gpu"].value == "h100" and boxes["case_gpu"].value == "rtx4090"
    # the next calculator still follows the case; its own-case panel, closed, draws no input
    assert "lb_gpu" not in boxes
    open_own_case(at, "lb_model", "lb_gpu", "lb_dtype")
    boxes = {box.key: box for box in at.selectbox}
    assert boxes["lb_gpu"].value is None and boxes["cm_gpu"].value == "h100"


# The CLI and the page give the same numbers for the same case: one figure per chapter.

def _page_text(at) -> str:
    """What the reader sees, tables in full (the fingerprint abbreviates long ones)."""
    return fingerprint(at) + "\n".join(frame.value.to_csv() for frame in at.dataframe)


def test_home_quick_check_equals_the_cli():
    at = open_page("", "en", model="qwen2.5-7b", gpu="l4", dtype="float16")
    data = json.loads(cli("estimate", "qwen2.5-7b", "--dtypes", "float16", "--gpu", "l4", "--json").stdout)
    row = data["rows"][0]
    assert format_bytes(row["total_bytes"]) in _page_text(at)
    assert format_bytes(row["reserved_bytes"]) in _page_text(at)
    assert format_bytes(gpu("l4").usable_bytes) in _page_text(at)


def test_slow_model_largest_batch_equals_the_cli():
    at = open_page("slow-model", "en", model="llama-3.2-1b", gpu="t4", dtype="float16", prompt="2000",
                   new_tokens="48")
    data = json.loads(cli("inference", "llama-3.2-1b", "--batch", "8", "--prompt", "2000", "--new-tokens", "48",
                          "--dtype", "float16", "--gpu", "t4", "--json").stdout)
    assert f"**{data['largest_batch']}** sequences of 2,048 tokens" in _page_text(at)


def test_oom_largest_context_equals_the_cli():
    at = open_page("oom", "en", model="llama-3.1-8b", gpu="l4", dtype="bfloat16", batch="2")
    data = json.loads(cli("inference", "llama-3.1-8b", "--batch", "2", "--context", "16", "--gpu", "l4",
                          "--json").stdout)
    assert f"{data['largest_context']:,} tokens" in _page_text(at)


def test_quantization_format_equals_the_cli():
    at = open_page("quantization", "en", model="mistral-7b-v0.1")
    data = json.loads(cli("quantize", "mistral-7b-v0.1", "--formats", "bnb-nf4", "--json").stdout)
    assert format_bytes(data["rows"][0]["total_bytes"]) in _page_text(at)


def test_parallelism_pipeline_equals_the_cli():
    at = open_page("parallelism", "en", model="llama-3.1-8b", dtype="bfloat16", pp_gpus="3")
    data = json.loads(cli("pipeline", "llama-3.1-8b", "--gpus", "3", "--json").stdout)
    assert all(format_bytes(stage["bytes"]) in _page_text(at) for stage in data["stages"])


def test_memory_estimate_and_estimator_equal_the_cli():
    data = json.loads(cli("estimate", "phi-2", "--json").stdout)
    for slug in ("memory-estimate", "estimator"):
        text = _page_text(open_page(slug, "en", model="phi-2"))
        assert all(format_bytes(row["total_bytes"]) in text for row in data["rows"]), slug


def test_serving_pool_equals_the_cli():
    """A GPTQ case on the serving chapter: the engine's int4 layout, as `serve` prints it."""
    at = open_page("serving", "en", model="llama-3.1-8b", gpu="h100", dtype="gptq-4bit")
    data = json.loads(cli("serve", "llama-3.1-8b", "--gpu", "h100", "--dtype", "gptq-4bit", "--json").stdout)
    assert data["dtype"] == "int4"
    text = _page_text(at)
    assert f"{data['kv_tokens']:,}" in text and format_bytes(data["weights_bytes_per_gpu"]) in text


def test_every_case_name_is_in_the_url_contract():
    readme = (chapters.ROOT / "docs" / "links.md").read_text(encoding="utf-8")
    for name in CASE_PARAMS:
        assert f"`{name}`" in readme, name
    for chapter in chapters.CHAPTERS:  # one example link per chapter
        assert f"/{chapter.slug}?lang=" in readme, chapter.slug
