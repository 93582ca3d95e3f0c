"""Building models from people's configs, in worker processes with a memory and a time limit.

The cheap checks (configs.check_config) refuse what a config says outright; what they cannot
see is what transformers does with the rest: a label table, layers whose cost grows with a key
no check knows, code paths that loop. So every config a reader or a command line gives is
built in a worker process (calculator/models/build_worker.py), never in the server:

- a worker is warm: an uncached config costs the build alone. Workers are forked from one
  template process that imported torch and transformers and built a small model once
  (calculator/models/worker_template.py): a new worker is ready in milliseconds instead of
  ~4.6 CPU-seconds of imports, and shares the template's pages; where the template cannot
  fork (not Linux, or a second thread in it), a worker is spawned and imports them itself;
- its resident memory is watched while it builds: past `memory_bytes` above its warm size it
  is killed, and the build is refused as too large (`build_memory_limit`); past `seconds` the
  same (`build_time_limit`); a worker that dies, or has grown by `growth_bytes` since it was
  warm, is replaced by a fresh one;
- several builds run at once in up to `workers` processes (a pool), and the threads of other
  readers never wait for them: cached answers are served by the model seam before the pool is
  asked. A worker beyond the first is stopped after `idle_seconds` without work.

Only the standard library: subprocess and pipes (multiprocessing's spawn and forkserver start
methods re-run the parent's __main__ in the child, and under Streamlit that is the page
script), /proc for the resident size, resource.setrlimit in the worker as a backstop. Linux;
elsewhere the time limit and the worker's own address-space cap still hold.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass
import os
from pathlib import Path
import pickle
import select
import subprocess
import sys
import threading
import time

from calculator.models import worker_template
from calculator.models.build_worker import HEADER, resident_bytes, write_frame
from calculator.core.errors import CalculatorError, Grouped
from calculator.core.reasons import Reason, exit_reason, library, reason

ROOT = Path(__file__).resolve().parents[2]
MAX_REPLY_BYTES = 64 * 2**20  # a summary is kilobytes; a reply this large is refused
POLL_SECONDS = 0.05
START_SECONDS = 120.0  # importing torch and transformers on a busy machine
# Errors that say nothing about the config: asked again next time, never cached.
PASSING_ERRORS = frozenset({"build_busy", "build_worker_failed", "build_worker_start_failed"})


def _env_number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(frozen=True)
class Limits:
    """What one build may use. Set from the environment (CALCULATOR_BUILD_MEMORY_MIB,
    CALCULATOR_BUILD_SECONDS, CALCULATOR_BUILD_WORKERS, CALCULATOR_BUILD_SPARE=0) when the pool
    is made."""

    memory_bytes: int = 1024 * 2**20  # above the worker's warm size
    seconds: float = 20.0
    workers: int = 2
    growth_bytes: int = 256 * 2**20  # a worker this much larger than when warm is replaced
    idle_seconds: float = 300.0
    spare: bool = True  # keep a warm worker beside the busy ones (a server; the CLI does not)

    @classmethod
    def from_environment(cls) -> Limits:
        default = cls()
        return cls(
            memory_bytes=int(_env_number("CALCULATOR_BUILD_MEMORY_MIB", default.memory_bytes / 2**20) * 2**20),
            seconds=_env_number("CALCULATOR_BUILD_SECONDS", default.seconds),
            workers=max(1, int(_env_number("CALCULATOR_BUILD_WORKERS", default.workers))),
            spare=os.environ.get("CALCULATOR_BUILD_SPARE", "1") != "0",
        )


class _Overrun(Exception):
    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind  # "memory" or "time"


class _Broken(Exception):
    """The worker stopped or answered something unreadable; `reason` says how, in each language."""

    def __init__(self, why: Reason) -> None:
        super().__init__(str(why))
        self.reason = why


def _pythonpath() -> str:
    return os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


class Worker:
    """One worker process and the pipe to it."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.last_used = time.monotonic()
        self.builds = 0
        started = time.monotonic()
        self.process = (self._forked(limits) if worker_template.SUPPORTED else None) or self._spawned(limits)
        kind, value = self._read(deadline=started + START_SECONDS, watch=False)
        if kind != "ready":
            self.stop()
            raise _Broken(library("worker", value))
        self.warm_bytes = int(value) or resident_bytes(self.process.pid)
        self.start_seconds = time.monotonic() - started

    @staticmethod
    def _spawned(limits: Limits) -> subprocess.Popen:
        """A worker that imports everything itself (where the template cannot fork)."""
        env = {**os.environ, "CALCULATOR_WORKER_MEMORY_BYTES": str(limits.memory_bytes),
               "CALCULATOR_WORKER_SECONDS": str(limits.seconds), "PYTHONPATH": _pythonpath()}
        return subprocess.Popen([sys.executable, "-m", "calculator.models.build_worker"], cwd=ROOT, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    @staticmethod
    def _forked(limits: Limits):
        """A worker forked from the warm template (calculator/models/worker_template.py);
        None when the template will not fork (then it is spawned)."""
        environ = {**os.environ, "PYTHONPATH": _pythonpath()}
        try:
            return worker_template.fork_worker(limits.memory_bytes, limits.seconds, environ, START_SECONDS)
        except worker_template.NotForked:
            return None
        except worker_template.TemplateFailed as failed:
            if failed.detail is not None:
                raise _Broken(library("worker", failed.detail)) from None
            if failed.returncode is None:
                raise _Broken(reason("worker_start_timeout", seconds=f"{START_SECONDS:g}")) from None
            raise _Broken(exit_reason(failed.returncode)) from None

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def resident(self) -> int:
        return resident_bytes(self.process.pid)

    def grown(self) -> bool:
        return self.resident() - self.warm_bytes > self.limits.growth_bytes

    def ask(self, request: dict):
        """Send one request; return the worker's reply. Raises _Overrun past a limit (the
        worker is then dead) and _Broken when the worker stopped answering."""
        try:
            write_frame(self.process.stdin, request)
        except (OSError, ValueError):
            raise _Broken(reason("worker_pipe_broken")) from None
        self.builds += 1
        reply = self._read(deadline=time.monotonic() + self.limits.seconds, watch=True)
        self.last_used = time.monotonic()
        if reply[0] in ("memory", "time"):
            self.stop()
            raise _Overrun(reply[0])
        return reply

    def _read(self, deadline: float, watch: bool):
        """One frame from the worker, watching its memory and the clock meanwhile."""
        out = self.process.stdout
        fd = out.fileno()
        buffer = b""
        needed = HEADER.size
        size = None
        while True:
            if watch and self.resident() - self.warm_bytes > self.limits.memory_bytes:
                self.stop()
                raise _Overrun("memory")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                if watch:
                    raise _Overrun("time")
                raise _Broken(reason("worker_start_timeout", seconds=f"{START_SECONDS:g}"))
            ready, _, _ = select.select([fd], [], [], min(POLL_SECONDS, remaining))
            if not ready:
                continue
            chunk = os.read(fd, needed - len(buffer))
            if not chunk:
                self.stop()
                if watch and self.process.returncode and self.process.returncode < 0:
                    raise _Overrun("memory")  # killed by the kernel or the address-space cap
                raise _Broken(exit_reason(self.process.returncode))
            buffer += chunk
            if len(buffer) < needed:
                continue
            if size is None:
                (size,) = HEADER.unpack(buffer)
                if size > MAX_REPLY_BYTES:
                    self.stop()
                    raise _Broken(reason("worker_reply_too_large", size=Grouped(size)))
                buffer, needed = b"", size
                if size:
                    continue
            try:
                return pickle.loads(buffer)
            except Exception:
                self.stop()
                raise _Broken(reason("worker_reply_unreadable")) from None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class Pool:
    """Up to `limits.workers` warm workers; each request takes an idle one, or starts one, or
    waits for one to come back (at most the time limit of a build, then `build_busy`)."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits.from_environment()
        self._idle: list[Worker] = []
        self._count = 0  # workers alive: idle, busy or starting
        self._lock = threading.Condition()
        self.started = 0  # workers started so far (replacements included)
        self.overruns = 0
        self.replacing = 0  # replacements starting in the background
        self._closed = False
        self._stopped = threading.Event()  # wakes the idle reaper when the pool closes
        self._reaper: threading.Thread | None = None

    def ask(self, request: dict):
        """("ok", value) or ("error", (code, params)) from a worker, or a CalculatorError
        for a build past the limits, a busy pool or a worker that failed."""
        worker = self._take()
        keep = False
        try:
            reply = worker.ask(request)
            keep = reply[0] in ("ok", "error") and worker.alive() and not worker.grown()
            return reply
        except _Overrun as overrun:
            with self._lock:
                self.overruns += 1
            if overrun.kind == "memory":
                raise CalculatorError("build_memory_limit", limit_mib=self.limits.memory_bytes // 2**20) from None
            raise CalculatorError("build_time_limit", seconds=f"{self.limits.seconds:g}") from None
        except _Broken as broken:
            raise CalculatorError("build_worker_failed", detail=broken.reason) from None
        finally:
            self._give_back(worker, keep)

    def _take(self) -> Worker:
        deadline = time.monotonic() + self.limits.seconds + START_SECONDS
        with self._lock:
            while True:
                self._retire_idle()
                if self._idle:
                    worker = self._idle.pop()
                    self._keep_a_spare_locked()
                    return worker
                if self._count < self.limits.workers and not self.replacing:  # else: wait for it
                    self._count += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CalculatorError("build_busy")
                self._lock.wait(remaining)
        try:  # start outside the lock: other readers keep taking idle workers meanwhile
            worker = Worker(self.limits)
        except BaseException as error:
            with self._lock:
                self._count -= 1
                self._lock.notify()
            if isinstance(error, _Broken):  # the server's problem, not the reader's config
                raise CalculatorError("build_worker_start_failed", detail=error.reason) from None
            raise
        with self._lock:
            self.started += 1
            self._keep_a_spare_locked()
        return worker

    def _give_back(self, worker: Worker, keep: bool) -> None:
        if not keep:
            worker.stop()
        with self._lock:
            if keep:
                self._idle.append(worker)
                self._start_reaper_locked()
            else:  # replaced at once: the next reader (often right after a refusal) finds it warm
                self._count -= 1
                if not self._closed:
                    self._start_spare_locked()
            self._lock.notify()

    def _keep_a_spare_locked(self) -> None:
        """With no idle worker left, start one in the background while the pool has room: the
        next reader (often right after a refusal) finds a warm worker, not a 15 s start."""
        if self.limits.spare and not self._idle and self._count < self.limits.workers and not self.replacing:
            self._start_spare_locked()

    def _start_spare_locked(self) -> None:
        """Start a worker in the background (lock held): it joins the idle ones when warm."""
        self._count += 1
        self.replacing += 1
        threading.Thread(target=self._start_spare, daemon=True, name="build-worker-spare").start()

    def _start_spare(self) -> None:
        try:
            worker = Worker(self.limits)
        except BaseException:
            worker = None
        with self._lock:
            self.replacing -= 1
            if worker is None or self._closed:
                self._count -= 1
            else:
                self.started += 1
                self._idle.append(worker)
                worker = None
            self._lock.notify_all()
        if worker is not None:
            worker.stop()

    def _start_reaper_locked(self) -> None:
        """One thread per pool retires idle workers on time: without it a server that nobody
        asked for a build kept its spare (~340 MiB) for good, retired only at the next build."""
        if self._reaper is None and not self._closed:
            self._reaper = threading.Thread(target=self._reap, daemon=True, name="build-worker-reaper")
            self._reaper.start()

    def _reap(self) -> None:
        interval = max(self.limits.idle_seconds / 4, 0.05)
        while not self._stopped.wait(interval):
            with self._lock:
                self._retire_idle()

    def _retire_idle(self) -> None:
        """Stop workers beyond the first that have had nothing to do for a while (lock held)."""
        now = time.monotonic()
        while len(self._idle) > 1 and now - self._idle[0].last_used > self.limits.idle_seconds:
            self._idle.pop(0).stop()
            self._count -= 1

    def workers(self) -> list[Worker]:
        with self._lock:
            return list(self._idle)

    def close(self) -> None:
        self._stopped.set()
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for worker in idle:
            worker.stop()


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool() -> Pool:
    """The process's pool, made on first use with the limits of the environment."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = Pool()
            atexit.register(_pool.close)
        return _pool


def reset_pool(limits: Limits | None = None) -> Pool:
    """Close the pool and make a new one (tests, and a server changing its limits)."""
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.close()
        _pool = Pool(limits)
        atexit.register(_pool.close)
        return _pool


def build(request: dict):
    """The value a worker computed for `request`, or the CalculatorError it (or the limits)
    gave."""
    kind, value = pool().ask(request)
    if kind == "error":
        code, params = value
        raise CalculatorError(code, **params)
    return value


def count(config_json: str, model_class: str = "auto", trust_remote_code: bool = False,
          source_dir: str | None = None):
    """meta.count in a worker: (ModelSummary, ArchSpec) of a config given as JSON."""
    return build({"op": "count", "config_json": config_json, "model_class": model_class,
                  "trust_remote_code": trust_remote_code, "source_dir": source_dir})


def count_hub_remote(repo: str, model_class: str = "auto"):
    """CLI only, with --trust-remote-code: the repository's own config code runs in a worker."""
    return build({"op": "count_hub_remote", "repo": repo, "model_class": model_class})


_model_types: frozenset[str] | None = None


def known_model_types() -> frozenset[str]:
    """The model types this transformers has classes for, asked of a worker once (the server
    itself never imports transformers for it)."""
    global _model_types
    if _model_types is None:
        _model_types = frozenset(build({"op": "model_types"}))
    return _model_types
