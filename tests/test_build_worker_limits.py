"""The build worker under its host's limits, and how soon a refusal reaches the reader: it
starts under a hard address-space limit (only ever lowering its soft limit), says a worker
that cannot start is the server's problem, and a replacement is started at once after a
refusal, so the next reader does not wait for one."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from calculator.models import builder

from calculator.models import catalog
from calculator.core.errors import CalculatorError
from calculator.models.seam import clear_caches, resolve_config
from tests.test_build_worker import many_experts

SCRIPT = """
import json, sys
from calculator.models import builder
from calculator.models import catalog
from calculator.core.errors import CalculatorError
try:
    print(builder.count(json.dumps(catalog.config("gpt2")))[0].parameters)
except CalculatorError as error:
    print(error.code); print(error.message("en")); print(error.message("fr"))
"""


def under_ulimit(kib: int) -> list[str]:
    """The script's lines, run with `ulimit -v` (a hard and soft address-space limit)."""
    out = subprocess.run(["bash", "-c", f'ulimit -v {kib} && exec "$0" -c "$1"', sys.executable, SCRIPT],
                         capture_output=True, text=True, timeout=300, cwd=builder.ROOT)
    return out.stdout.splitlines()


def test_the_worker_starts_under_a_hard_limit_below_its_own_cap():
    """A warm worker maps about 0.75 GiB and caps itself at that plus twice the 1 GiB build
    limit: under a 2 GiB hard limit it lowers its soft limit to 2 GiB instead of failing."""
    assert under_ulimit(2 * 2**20)[0] == "124439808"  # gpt2, counted by hand in test_meta


def test_a_worker_that_cannot_start_is_the_servers_problem():
    lines = under_ulimit(300 * 2**10)  # too little to import torch
    assert lines[0] == "build_worker_start_failed"
    assert "server" in lines[1] and "not in your configuration" in lines[1]
    assert "serveur" in lines[2] and "pas de votre configuration" in lines[2]


@pytest.fixture
def pool():
    clear_caches()
    yield builder.reset_pool(builder.Limits(seconds=2, workers=2))
    clear_caches()
    builder.reset_pool()


def wait_for(condition, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)


def test_a_refusal_right_after_a_refusal_comes_within_the_limit(pool):
    resolve_config(catalog.config("gpt2"), "gpt2.json")
    wait_for(lambda: len(pool.workers()) == 2)  # the one that built gpt2, and a spare
    for experts in (4096, 4095):  # two configs past the 2 s limit, one right after the other
        start = time.monotonic()
        with pytest.raises(CalculatorError) as info:
            resolve_config(many_experts(experts), f"{experts}.json")
        assert info.value.code == "build_time_limit"
        assert time.monotonic() - start < 2 + 2
    wait_for(lambda: len(pool.workers()) == 2)  # both replaced in the background
    assert pool.overruns == 2 and pool.started == 4
