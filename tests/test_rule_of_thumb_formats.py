"""The memory-estimate chapter's rule of thumb with the case's format: parameters x the
format's average bytes per parameter (scales included) x 1.1, which is `estimate --dtypes`'s
rule of thumb for the case's model, and the page names the format."""

from __future__ import annotations

import math

import pytest

from calculator.core.precision import parameter_bytes, rule_of_thumb_bytes
from calculator.memory.estimate import rule_of_thumb_figures
from calculator.models.seam import catalog_model
from guide.format import format_bytes
from tests.apptest import open_page
from tests.test_parity import cli_json


def test_the_rule_by_hand():
    assert rule_of_thumb_figures(7_000_000_000, 2.0) == (parameter_bytes(7_000_000_000, "bfloat16"),
                                                          rule_of_thumb_bytes(7_000_000_000, "bfloat16"))
    assert rule_of_thumb_figures(1_000, 0.5) == (500, 550)


@pytest.mark.parametrize("lang,words", [("en", "the average over"), ("fr", "la moyenne sur")])
@pytest.mark.parametrize("model,dtype", [("gpt-oss-20b", "mxfp4"), ("llama-3.1-8b", "bnb-nf4")])
def test_the_widget_gives_estimates_rule_for_the_cases_format(lang, words, model, dtype):
    at = open_page("memory-estimate", lang, model=model, dtype=dtype)
    assert not at.exception, [e.value for e in at.exception]
    row = cli_json("estimate", model, "--dtypes", dtype)["rows"][0]
    values = [m.value for m in at.metric]
    assert format_bytes(row["rule_of_thumb_bytes"], lang, system="decimal") in values
    assert format_bytes(row["rule_of_thumb_bytes"], lang) in values
    assert format_bytes(row["total_bytes"], lang, system="decimal") in values
    plain = math.ceil(catalog_model(model).summary.parameters * 2 * 1.1)  # bfloat16's rule: not shown
    assert format_bytes(plain, lang, system="decimal") not in values
    assert any(words in c.value and dtype in c.value for c in at.caption), [c.value for c in at.caption]


def test_gpt_oss_mxfp4_rule_by_hand():
    """gpt-oss-20b's MXFP4 experts at 17 bytes per 32 weights, the rest in bfloat16, x 1.1."""
    model = catalog_model("gpt-oss-20b")
    c = model.config
    experts = c["num_hidden_layers"] * c["num_local_experts"] * 3 * c["hidden_size"] * c["intermediate_size"]
    by_hand = (experts * 17 / 32 + (model.summary.parameters - experts) * 2) * 1.1
    at = open_page("memory-estimate", "en", model="gpt-oss-20b", dtype="mxfp4")
    shown = cli_json("estimate", "gpt-oss-20b", "--dtypes", "mxfp4")["rows"][0]["rule_of_thumb_bytes"]
    assert abs(shown - by_hand) / by_hand < 0.002
    assert format_bytes(shown, "en") in [m.value for m in at.metric]


def test_typed_billions_take_the_formats_average():
    """70 billion typed with the case in bnb-nf4: the case model's average size, times 70e9, x 1.1."""
    row = cli_json("estimate", "llama-3.1-8b", "--dtypes", "bnb-nf4")["rows"][0]
    at = open_page("memory-estimate", "en", model="llama-3.1-8b", dtype="bnb-nf4", rt_params="70")
    assert not at.exception, [e.value for e in at.exception]
    rule = math.ceil(70e9 * row["bytes_per_param"] * 1.1)
    assert format_bytes(rule, "en", system="decimal") in [m.value for m in at.metric]
