"""Build workers forked from one warm template process, instead of each importing torch and
transformers again.

A worker costs about 4.6 CPU-seconds to start on its own (torch 1.3 s, transformers'
modeling_utils 2.0 s, ...), and the pool starts one after every refusal: a reader sending
configs past the limits made the server pay that much CPU each time, and the next reader
waited for it. The template (`python -m calculator.models.build_worker --template FD`) imports
and warms up once, then forks a worker per request on its control socket; a forked worker is
ready in a few milliseconds and shares the template's pages until it writes them.

fork copies only the calling thread, so the template must have no other: torch starts an
OpenMP thread at import unless OMP_NUM_THREADS=1 (meta-device builds compute nothing, so one
thread loses nothing), and the template counts its threads before each fork and refuses to fork
if there is more than one (the pool then starts a worker the old way).

The control socket (AF_UNIX, SOCK_SEQPACKET: one message per send) carries pickles:
- pool -> template: ("fork", {"memory": bytes, "seconds": s, "environ": {...}}) with two file
  descriptors (the worker's stdin and stdout), and ("kill", pid);
- template -> pool: ("ready", resident bytes), ("failed", why), ("forked", pid),
  ("not_forked", why), ("exited", pid, returncode).
The template is the forked workers' parent: it reaps them and reports how each ended, and
kills one only while it has not reaped it (a pid is never reused under it). It stops at the end
of its control socket (the pool's process is gone). Linux only; elsewhere the pool spawns.

A template imports modules that read the environment once (huggingface_hub's endpoint, ...),
so each environment gets its own: a server has one; a process whose environment changes (tests)
keeps the two used last, and each worker's environment is set to the pool's when it is forked.
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import queue
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MESSAGE_BYTES = 1 << 16
MAX_EXITS_KEPT = 256
# Names that change under a running process without changing what a build does.
VOLATILE_ENVIRON = frozenset({"PYTEST_CURRENT_TEST", "CALCULATOR_WORKER_MEMORY_BYTES", "CALCULATOR_WORKER_SECONDS"})
SUPPORTED = sys.platform.startswith("linux") and hasattr(socket, "send_fds")


# ---- the template process --------------------------------------------------------------------

def _send(control: socket.socket, message) -> None:
    control.send(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0  # unknown: /proc is where the count comes from on Linux


def run_template(fd: int, warm_up, serve) -> int:
    """The template's life: warm up, then fork a worker running `serve` for each request."""
    sys.stdout = sys.stderr
    control = socket.socket(fileno=fd)
    try:
        warm_up()
    except Exception as exc:  # a broken install: said as a worker says it
        _send(control, ("failed", f"{type(exc).__name__}: {exc}"[:200]))
        return 1
    from calculator.models.build_worker import resident_bytes

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # wakes the select below
    children: set[int] = set()
    _send(control, ("ready", resident_bytes()))
    try:
        while True:
            ready, _, _ = select.select([control, wake_read], [], [])
            if wake_read in ready:
                os.read(wake_read, 512)
            _reap(children, control)
            if control not in ready:
                continue
            data, fds, _, _ = socket.recv_fds(control, MESSAGE_BYTES, 2)
            if not data:
                return 0  # the pool's process is gone
            try:
                _obey(pickle.loads(data), fds, children, control, (wake_read, wake_write), serve)
            finally:
                for descriptor in fds:
                    os.close(descriptor)
    except (BrokenPipeError, ConnectionError):
        return 0


def _obey(message, fds, children: set[int], control, wake: tuple[int, int], serve) -> None:
    if message[0] == "kill":
        if message[1] in children:  # not reaped yet: the pid is still this child's
            os.kill(message[1], signal.SIGKILL)
        return
    if message[0] != "fork":
        return
    if len(fds) != 2:  # (out of descriptors here: the kernel cut them) answered, not left waiting
        _send(control, ("not_forked", f"{len(fds)} descriptors received"))
        return
    if _threads() != 1:
        _send(control, ("not_forked", f"the template runs {_threads()} threads"))
        return
    pid = os.fork()
    if pid == 0:
        _become_worker(message[1], fds, control, wake, serve)  # never returns
    children.add(pid)
    _send(control, ("forked", pid))


def _become_worker(limits: dict, fds, control: socket.socket, wake: tuple[int, int], serve) -> None:
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(control.detach())
        for descriptor in wake:
            os.close(descriptor)
        os.environ.clear()
        os.environ.update(limits["environ"])
        code = serve(os.fdopen(fds[0], "rb"), os.fdopen(fds[1], "wb"), limits["memory"], limits["seconds"])
    finally:
        os._exit(code)


def _reap(children: set[int], control: socket.socket) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        _send(control, ("exited", pid, os.waitstatus_to_exitcode(status)))


# ---- the pool's side -------------------------------------------------------------------------

class TemplateFailed(Exception):
    """The template did not start or stopped: `detail` is a worker's failure, or the exit code."""

    def __init__(self, detail: str | None, returncode: int | None) -> None:
        super().__init__(detail or str(returncode))
        self.detail = detail
        self.returncode = returncode


class NotForked(Exception):
    """The template would not fork (more than one thread): start a worker the old way."""


def environ_key(environ: dict[str, str]) -> frozenset:
    return frozenset((k, v) for k, v in environ.items() if k not in VOLATILE_ENVIRON)


class Template:
    """A running template process and the pool's end of its control socket."""

    def __init__(self, environ: dict[str, str], start_seconds: float) -> None:
        self.key = environ_key(environ)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "calculator.models.build_worker", "--template", str(theirs.fileno())],
                cwd=ROOT, env=env, pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.control = ours
        self._exits: dict[int, int] = {}
        self._forked: queue.Queue = queue.Queue()
        self._changed = threading.Condition()
        self._fork_lock = threading.Lock()
        self.gone = False
        ours.settimeout(start_seconds)
        try:
            first = pickle.loads(ours.recv(MESSAGE_BYTES) or pickle.dumps(("eof",)))
        except (TimeoutError, OSError, pickle.UnpicklingError):
            first = ("timeout",)
        if first[0] != "ready":
            self.close()
            if first[0] == "timeout":
                raise TemplateFailed(None, None)
            raise TemplateFailed(first[1] if first[0] == "failed" else None, self.process.returncode)
        ours.settimeout(None)
        self.warm_bytes = first[1]
        threading.Thread(target=self._listen, daemon=True, name="build-worker-template").start()

    def alive(self) -> bool:
        return not self.gone and self.process.poll() is None

    def _listen(self) -> None:
        while True:
            try:
                data = self.control.recv(MESSAGE_BYTES)
            except OSError:
                data = b""
            if not data:
                with self._changed:
                    self.gone = True
                    self._changed.notify_all()
                self._forked.put(None)
                return
            message = pickle.loads(data)
            if message[0] == "exited":
                with self._changed:
                    self._exits[message[1]] = message[2]
                    while len(self._exits) > MAX_EXITS_KEPT:  # codes nobody asked for
                        del self._exits[next(iter(self._exits))]
                    self._changed.notify_all()
            else:
                self._forked.put(message)

    def fork(self, memory: int, seconds: float, environ: dict[str, str], timeout: float) -> ForkedProcess:
        """A new worker, its pipes connected to this process."""
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        request = ("fork", {"memory": memory, "seconds": seconds, "environ": dict(environ)})
        with self._fork_lock:
            try:
                socket.send_fds(self.control, [pickle.dumps(request)], [stdin_read, stdout_write])
                reply = self._forked.get(timeout=timeout)
            except (OSError, queue.Empty):
                reply = None
            finally:
                os.close(stdin_read)
                os.close(stdout_write)
        if reply is None or reply[0] != "forked":
            os.close(stdin_write)
            os.close(stdout_read)
            if reply is not None and reply[0] == "not_forked":
                raise NotForked(reply[1])
            self.close()  # a late reply would answer the next fork: this template is done
            raise TemplateFailed(None, self.process.poll())
        return ForkedProcess(self, reply[1], stdin_write, stdout_read)

    def kill(self, pid: int) -> None:
        try:
            _send(self.control, ("kill", pid))
        except OSError:
            pass

    def exit_code(self, pid: int, timeout: float | None = 0) -> int | None:
        """How the worker `pid` ended, once the template has reaped it (None: not yet)."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self.gone, timeout)
            return self._exits.pop(pid, None)  # asked once: the process keeps it

    def close(self) -> None:
        self.gone = True
        try:
            self.control.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.control.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ForkedProcess:
    """A forked worker with the part of subprocess.Popen's interface the pool uses."""

    def __init__(self, template: Template, pid: int, stdin_fd: int, stdout_fd: int) -> None:
        self.template = template
        self.pid = pid
        self.stdin = os.fdopen(stdin_fd, "wb")
        self.stdout = os.fdopen(stdout_fd, "rb")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.template.exit_code(self.pid)
            if self.returncode is None and self.template.gone and not Path(f"/proc/{self.pid}").exists():
                self.returncode = -signal.SIGKILL  # its template died first: how it ended is lost
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            if self.template.gone:
                os.kill(self.pid, signal.SIGKILL)  # no template to ask: orphans are init's now
            else:
                self.template.kill(self.pid)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.template.exit_code(self.pid, timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(f"build worker {self.pid}", timeout)
        return self.returncode


# A template per environment (a server's never changes; a test may change it and back), the
# least recently used closed beyond MAX_TEMPLATES.
MAX_TEMPLATES = 2
_templates: dict[frozenset, Template] = {}
_template_lock = threading.Lock()
atexit.register(lambda: close_templates())


def fork_worker(memory: int, seconds: float, environ: dict[str, str], start_seconds: float) -> ForkedProcess:
    """A worker forked from the template of this environment, started (or restarted, when it
    died) as needed."""
    key = environ_key(environ)
    with _template_lock:
        template = _templates.pop(key, None)
        if template is not None and not template.alive():
            template.close()  # its workers keep running: they answer their pool, not it
            template = None
        if template is None:
            template = Template(environ, start_seconds)
        _templates[key] = template  # the most recently used last
        while len(_templates) > MAX_TEMPLATES:
            _templates.pop(next(iter(_templates))).close()
    return template.fork(memory, seconds, environ, start_seconds)


def current_template() -> Template | None:
    """The template used last (tests and benchmarks read its process)."""
    with _template_lock:
        return next(reversed(_templates.values()), None)


def close_templates() -> None:
    with _template_lock:
        while _templates:
            _templates.popitem()[1].close()
