"""The offloading chapter's plan is made in a build worker: the same plan as building the
model here, no model kept in this process, a config past the build limits refused in time."""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

from calculator.models import builder

from calculator.models import catalog

from calculator.distributed import offload_plan
from calculator.core.errors import CalculatorError
from calculator.distributed.offload import build_meta_model, plan_device_map
from tests.test_build_worker import many_experts


@pytest.fixture
def limits():
    def make(**values) -> builder.Pool:
        offload_plan._plans = None
        values.setdefault("spare", False)
        return builder.reset_pool(builder.Limits(**values))
    yield make
    offload_plan._plans = None
    builder.reset_pool()


def test_the_worker_plans_as_the_model_built_here(limits):
    pool = limits()
    config = catalog.config("llama-3.1-8b")
    budgets, cpu = [6 * 2**30, 6 * 2**30], 4 * 2**30
    plan, architecture = offload_plan.plan_config(json.dumps(config), budgets, cpu, "bfloat16", "bnb-nf4")
    here = build_meta_model(config, "bfloat16")
    expected = plan_device_map(here, budgets, cpu, "bfloat16", "bnb-nf4")
    assert plan == expected and architecture == type(here).__name__ == "LlamaForCausalLM"
    assert pool.started == 1 and pool.workers()[0].pid != os.getpid()
    assert offload_plan._last_model is None  # the model lives in the worker only


def test_a_config_past_the_time_limit_is_refused_in_time_and_kept_refused(limits):
    pool = limits(seconds=2)
    offload_plan.plan_config(json.dumps(catalog.config("gpt2")), [2**30], None)  # a warm worker
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    with pytest.raises(CalculatorError) as info:
        offload_plan.plan_config(json.dumps(many_experts(4096)), [2**30], None)
    assert info.value.code == "build_time_limit" and time.monotonic() - start < 2 + 2
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 16  # MiB, this process
    with pytest.raises(CalculatorError):
        offload_plan.plan_config(json.dumps(many_experts(4096)), [2**30], None)
    assert pool.overruns == 1  # the refusal was kept: not built again


def test_the_plan_cache_is_bounded_in_bytes(limits, monkeypatch):
    limits()
    config = json.dumps(catalog.config("gpt2"))
    offload_plan.plan_config(config, [2**27], None)
    one = offload_plan.cache_stats()[1]
    offload_plan._plans = None
    monkeypatch.setattr(offload_plan, "PLAN_CACHE_BYTES", 3 * one)
    for step in range(1, 8):
        offload_plan.plan_config(config, [step * 2**27], None)
    entries, size = offload_plan.cache_stats()
    assert 2 <= entries < 7 and size <= 3 * one
