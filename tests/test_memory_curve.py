"""The memory-curve benchmark's own parts (bench/memory_curve.py): its configs are distinct and
real, it reads a server and its workers apart, and it calls a curve flat only when it is."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time

from bench.load import MemorySampler
from bench.memory_curve import MARKS, distinct_config, flat, model_chapters, table
from calculator.models.configs import check_config

MiB = 2**20


def test_every_chapter_that_takes_a_model_is_measured_offloading_included():
    chapters = model_chapters()
    assert "cpu-offloading" in chapters and "estimator" in chapters and "" in chapters
    assert len(chapters) == len(set(chapters)) == 10


def test_each_step_of_the_run_gets_a_config_no_other_step_has():
    seen = set()
    for chapter, index, upload in itertools.product(range(10), range(1, 101), (False, True)):
        config = distinct_config(chapter, index, upload)
        check_config(config)  # the server's cheap checks let it through to a build
        seen.add(json.dumps(config, sort_keys=True))
    assert len(seen) == 10 * 100 * 2


def test_a_config_of_the_run_builds_the_model_counted_by_hand():
    from calculator.models import meta

    config = distinct_config(2, 4, upload=False)  # mistral, hidden 64, 2 layers, 4 heads, 2 KV heads
    assert (config["model_type"], config["hidden_size"], config["num_hidden_layers"]) == ("mistral", 64, 2)
    h, inner, layers, vocab = 64, 2 * 64 + 8 * 4, 2, 1000 + 2000 + 8
    assert (config["intermediate_size"], config["vocab_size"]) == (inner, vocab)
    kv = 2 * (h // 4)  # two KV heads of 16
    per_layer = h * h + 2 * h * kv + h * h + 3 * h * inner + 2 * h  # q, k and v, o, gate/up/down, two norms
    expected = vocab * h + layers * per_layer + h + vocab * h  # embeddings, layers, final norm, untied head
    summary, _ = meta.count(config)
    assert summary.parameters == expected


def test_the_server_and_its_workers_are_read_apart():
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; b = bytearray(64 * 2**20); "
                              "b[::4096] = b'x' * len(b[::4096]); print('ready', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        own, workers = MemorySampler(child.pid).split()  # the child as "server": no children of its own
        assert own >= 64 * MiB and workers == []
        import os

        mine, children = MemorySampler(os.getpid()).split()
        assert mine > 0 and any(size >= 64 * MiB for size in children)
    finally:
        child.kill()
        child.wait()


def reading(server_mib: float, workers_mib: float = 300) -> dict:
    return {"server": int(server_mib * MiB), "workers": int(workers_mib * MiB), "worker_count": 2}


def test_a_curve_is_flat_only_when_the_server_stays_within_16_mib_of_its_tenth_step():
    warm = {0: reading(170, 0), 10: reading(178), 25: reading(180), 50: reading(185), 100: reading(193)}
    assert flat(warm)  # the first builds (worker start, first imports) are not growth
    growing = {**warm, 100: reading(178 + 17)}
    assert not flat(growing)
    assert "| no |" in table([{"chapter": "oom", "curve": growing, "errors": []}])
    assert "| 170 + 0 (2) | 178 + 300 (2) |" in table([{"chapter": "oom", "curve": warm, "errors": []}])
    assert MARKS == (0, 10, 25, 50, 100)


def test_the_sampler_reads_a_process_that_is_gone_as_zero():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    time.sleep(0.1)
    assert MemorySampler(gone.pid).split() == (0, [])


def test_memory_holders_names_who_holds_an_allocation():
    """bench/memory_holders.py sums tracemalloc's growth by holder, from the traceback's files."""
    from bench.memory_holders import holder

    assert holder(["/x/calculator/memory/inference.py", "/x/calculator/core/memo.py"]) == "engine answers kept by inputs"
    assert holder(["/x/calculator/models/seam.py"]) == "model seam caches"
    assert holder(["/x/site-packages/plotly/basedatatypes.py"]) == "kept figures"
    assert holder(["/x/streamlit/runtime/state.py"]) == "other"
