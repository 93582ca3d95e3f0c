"""speed's default precision is the card's compute precision: float16 on a card
without bfloat16 tensor cores, as data-parallel and slow-model#precision choose, said in the
JSON's assumptions; the batch-size page's answer and the command it prints agree."""

from __future__ import annotations

from contextlib import redirect_stdout
import io

import pytest

from calculator.answers.markdown import markdown
from calculator.answers.verdicts import compute_dtype_for
from calculator.cli import main as cli
from calculator.core.gpus import gpu
from guide.widgets import batch_size
from tests.test_parity import cli_json, page_inputs

MODEL = "llama-3.2-1b"


@pytest.mark.parametrize("card, expected", [("t4", "float16"), ("v100-16gb", "float16"), ("p100", "float16"),
                                            ("h100", "bfloat16"), ("rtx4090", "bfloat16")])
def test_speed_defaults_to_the_precision_data_parallel_computes_in(card, expected):
    speed = cli_json("speed", MODEL, "--gpu", card, "--batches", "1")
    parallel = cli_json("data-parallel", MODEL, "--gpu", card, "--samples", "100", "--gpus-per-node", "2")
    assert speed["dtypes"] == [expected] == [parallel["dtype"]] == [compute_dtype_for(gpu(card))[0]]
    said = speed["assumptions"][0]
    assert said["id"] == "compute_dtype" and said["value"]["dtype"] == expected
    assert (said["value"]["reason"] == "no_bf16_tensor_cores") == (expected == "float16")


def test_a_precision_asked_for_is_kept():
    asked = cli_json("speed", MODEL, "--gpu", "t4", "--dtypes", "bfloat16", "--batches", "8")
    assert asked["dtypes"] == ["bfloat16"]
    assert all(a["id"] != "compute_dtype" for a in asked["assumptions"])


def test_the_t4_default_is_float16_and_bfloat16_runs_at_the_float32_rate():
    default = cli_json("speed", MODEL, "--gpu", "t4", "--batches", "8")
    float16 = cli_json("speed", MODEL, "--gpu", "t4", "--dtypes", "float16", "--batches", "8")
    bfloat16 = cli_json("speed", MODEL, "--gpu", "t4", "--dtypes", "bfloat16", "--batches", "8")
    assert default["rows"] == float16["rows"]
    # a prefill of 8 x 1,024 tokens is compute-bound: the T4's datasheet gives 65 TFLOP/s in
    # float16 tensor cores against 8.1 in float32, the rate bfloat16 gets there
    ratio = bfloat16["rows"][0]["time_to_first_token_s"] / default["rows"][0]["time_to_first_token_s"]
    assert ratio == pytest.approx(65 / 8.1, rel=0.15)


def _cli_markdown(argv: tuple[str, ...], lang: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main([*argv, "--markdown", "--lang", lang]) == 0
    return out.getvalue()


@pytest.mark.parametrize("lang", ["en", "fr"])
@pytest.mark.parametrize("card", ["t4", "h100"])
def test_the_batch_size_page_answers_as_the_command_it_prints(card, lang):
    inputs = page_inputs("slow-model", MODEL, card)
    assert inputs.dtype == "bfloat16"  # the case's own precision
    work = batch_size.work_of(inputs)
    answer = batch_size.paste_answer(inputs, work, [1, 8])
    assert "--dtypes" not in answer.argv  # speed's default: the card's precision
    page = markdown(answer, lang)
    assert _cli_markdown(("speed", *answer.argv), lang).strip() == page.strip()
    note = "tensor cores bfloat16" if lang == "fr" else "bfloat16 tensor cores"
    first_line = page.split("\n")[0]
    assert (note in page) == (card == "t4")
    assert (f"{'en' if lang == 'fr' else 'in'} float16 " in first_line) == (card == "t4")
