"""vLLM's scheduler defaults are chosen once, in the engine (calculator.serving.vllm.default_limits),
and every calculator of the serving chapter and `serve` use them.

The table is vLLM's EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py): total memory of
70 GiB or more and not an A100 -> {LLM_CLASS: 16384, OPENAI_API_SERVER: 8192} tokens per step
and 1024 sequences; otherwise {LLM_CLASS: 8192, OPENAI_API_SERVER: 2048} and 256."""

from __future__ import annotations

import json

import pytest

from calculator.core.errors import CalculatorError
from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.serving.vllm import default_limits
from calculator.serving.plan import serve
from guide.format import format_bytes
from tests.apptest import open_page
from tests.cli_runner import run_cli as cli  # in this process: these tests read what it prints


@pytest.mark.parametrize("key, usage, expected", [
    ("h100", "server", (8192, 1024)), ("h200", "server", (8192, 1024)),
    ("a100-80gb", "server", (2048, 256)),  # 80 GB, but vLLM keeps the A100 on the small defaults
    ("l4", "server", (2048, 256)), ("rtx4090", "server", (2048, 256)),
    ("h100", "offline", (16384, 1024)), ("l4", "offline", (8192, 256)),
])
def test_defaults_follow_the_card_and_the_usage_context(key, usage, expected):
    card = gpu(key)
    assert default_limits(card.total_bytes, card.key, usage) == expected
    plan = serve(catalog_model("llama-3.1-8b"), card, context=8192, layouts=False, usage=usage)
    assert (plan.max_num_batched_tokens, plan.max_num_seqs) == expected


def test_unset_limits_are_the_engines_and_the_cli_prints_them():
    model, card = catalog_model("llama-3.1-8b"), gpu("h100")
    unset = serve(model, card, context=8192, layouts=False)
    explicit = serve(model, card, context=8192, layouts=False, max_num_batched_tokens=8192, max_num_seqs=1024)
    assert unset.replica == explicit.replica
    small = serve(model, card, context=8192, layouts=False, max_num_batched_tokens=2048, max_num_seqs=256)
    assert small.replica.activation_reserve_bytes < unset.replica.activation_reserve_bytes
    data = json.loads(cli("serve", "llama-3.1-8b", "--gpu", "h100", "--context", "8192", "--json").stdout)
    assert (data["max_num_batched_tokens"], data["max_num_seqs"]) == (8192, 1024)
    assert data["activation_reserve_bytes"] == unset.replica.activation_reserve_bytes
    with pytest.raises(CalculatorError):
        default_limits(card.total_bytes, card.key, "batch")
    bad = cli("serve", "llama-3.1-8b", "--gpu", "h100", "--usage-context", "batch")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_every_calculator_of_the_page_shows_the_engines_reserve():
    """The serving-memory and engine-settings calculators, left as they open, show the reserve
    `serve` computes with vLLM's defaults for the page's card (an H100: 8,192 / 1,024)."""
    at = open_page("serving", gpu="h100", model="llama-3.1-8b")
    reserve = serve(catalog_model("llama-3.1-8b"), gpu("h100"), context=8192, layouts=False)
    shown = [m.value for m in at.metric if m.label == "Activation reserve"]
    assert len(shown) == 2 and set(shown) == {format_bytes(reserve.replica.activation_reserve_bytes, "en")}
