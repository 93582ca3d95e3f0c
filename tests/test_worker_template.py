"""Build workers forked from one warm template process (calculator/models/worker_template.py):
a pool's workers are the template's children, ready without importing torch again; the
template outlives a pool, follows the environment, is replaced when it dies, and refuses to
fork with a second thread running (the pool then spawns a worker the old way)."""

from __future__ import annotations

import os
from pathlib import Path
import pickle
import signal
import socket
import subprocess

import pytest

from calculator.models import builder, catalog, worker_template
from calculator.models.seam import clear_caches, resolve_config


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.fixture
def fresh_pool():
    def make() -> builder.Pool:
        clear_caches()
        return builder.reset_pool(builder.Limits(spare=False, workers=1))
    yield make
    clear_caches()
    builder.reset_pool()


def one_worker(pool: builder.Pool, vocab: int) -> builder.Worker:
    resolve_config({**catalog.config("gpt2"), "vocab_size": vocab}, f"{vocab}.json")
    [worker] = pool.workers()
    return worker


def test_workers_are_forked_from_one_template_that_outlives_the_pool(fresh_pool):
    first = one_worker(fresh_pool(), 50_001)
    template = worker_template.current_template()
    assert isinstance(first.process, worker_template.ForkedProcess)
    assert parent_of(first.pid) == template.process.pid != os.getpid()
    second = one_worker(fresh_pool(), 50_002)  # a new pool: a new worker, the same template
    assert worker_template.current_template() is template and parent_of(second.pid) == template.process.pid


def test_a_killed_worker_reports_the_signal(fresh_pool):
    worker = one_worker(fresh_pool(), 50_003)
    worker.process.kill()
    assert worker.process.wait(timeout=10) == -signal.SIGKILL
    assert not worker.alive()


def test_a_dead_template_is_replaced(fresh_pool):
    one_worker(fresh_pool(), 50_004)
    old = worker_template.current_template()
    old.process.kill()
    old.process.wait()
    worker = one_worker(fresh_pool(), 50_005)
    assert worker_template.current_template() is not old and parent_of(worker.pid) == worker_template.current_template().process.pid


def test_a_changed_environment_gets_its_own_template(fresh_pool, monkeypatch):
    one_worker(fresh_pool(), 50_006)
    old = worker_template.current_template()
    monkeypatch.setenv("CALCULATOR_TEMPLATE_TEST", "1")
    worker = one_worker(fresh_pool(), 50_007)
    changed = worker_template.current_template()
    assert changed is not old and dict(changed.key).get("CALCULATOR_TEMPLATE_TEST") == "1"
    assert b"CALCULATOR_TEMPLATE_TEST=1" in Path(f"/proc/{worker.pid}/environ").read_bytes()
    monkeypatch.delenv("CALCULATOR_TEMPLATE_TEST")
    one_worker(fresh_pool(), 50_009)  # the environment as it was: its template, still warm
    assert worker_template.current_template() is old and old.alive()


def test_a_template_that_will_not_fork_leaves_the_pool_spawning(fresh_pool, monkeypatch):
    def refuse(*args, **kwargs):
        raise worker_template.NotForked("the template runs 2 threads")
    monkeypatch.setattr(worker_template, "fork_worker", refuse)
    worker = one_worker(fresh_pool(), 50_008)
    assert isinstance(worker.process, subprocess.Popen) and parent_of(worker.pid) == os.getpid()


def test_the_template_refuses_to_fork_with_a_second_thread(monkeypatch):
    """fork copies only the calling thread: with another one running, the template answers
    not_forked (in its own process this is read from /proc/self/task)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    monkeypatch.setattr(worker_template, "_threads", lambda: 2)
    read_end, write_end = os.pipe()
    try:
        worker_template._obey(("fork", {}), [read_end, write_end], set(), theirs, (-1, -1), serve=None)
        assert pickle.loads(ours.recv(4096)) == ("not_forked", "the template runs 2 threads")
        # descriptors cut by the kernel (the template out of them): answered at once too
        worker_template._obey(("fork", {}), [read_end], set(), theirs, (-1, -1), serve=None)
        assert pickle.loads(ours.recv(4096)) == ("not_forked", "1 descriptors received")
    finally:
        for end in (ours, theirs):
            end.close()
        os.close(read_end)
        os.close(write_end)
