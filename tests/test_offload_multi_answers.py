"""Copy as answer on cpu-offloading#zero-offload and serving#multi-gpu-inference: the page's
answer is the command's word for word (zero-offload, multi-gpu), in the reader's language,
with the figures the page's table shows."""

from __future__ import annotations

import pytest

from calculator.core.messages import text
from tests.apptest import open_page
from tests.test_answers_chapters import CASE, check_same_as_cli, page_answers, plain


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_zero_offload_answer(lang):
    at = open_page("cpu-offloading", lang, **CASE)
    assert not at.exception
    answer = page_answers(at)["zero-offload"]
    assert "#zero-offload" in answer and "--tokens" in answer
    verdict = check_same_as_cli(answer, lang)
    setup, on_gpu = text("offload.col_setup", lang), text("offload.col_gpu", lang)
    table = next(frame.value for frame in at.dataframe if setup in frame.value and on_gpu in frame.value)
    offloaded, plain_gpu = (plain(v) for v in table[on_gpu].iloc[[1, 0]])
    assert f"**{offloaded}**" in verdict and plain_gpu in verdict  # ZeRO-Offload's GPU share, and without it


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_multi_gpu_answer(lang):
    at = open_page("serving", lang, **CASE)
    assert not at.exception
    answer = page_answers(at)["multi-gpu"]
    assert "#multi-gpu-inference" in answer and "DistributedConfig" in answer
    verdict = check_same_as_cli(answer, lang)
    plan, peak = text("serving.col_plan", lang), text("serving.col_peak", lang)
    table = next(frame.value for frame in at.dataframe if plan in frame.value and peak in frame.value)
    assert any(f"**{plain(value)}**" in verdict for value in table[peak])  # the fullest GPU of the way it names
