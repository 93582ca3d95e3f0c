"""The worker process that builds models from configs (python -m calculator.models.build_worker).

Started and fed by calculator.models.builder: forked from the warm template (`--template FD`,
calculator/models/worker_template.py, which imported torch and transformers once for every
worker it forks) or spawned on its own and importing them itself. It says it is ready, then
answers requests one at a time, each a frame (an 8-byte length, then a pickle) on its standard
input, with a frame on its standard output. It never reads anything else
and stops at the end of its input (its parent is gone). Its own limits back up the parent's
watch: its address space is capped a little above what one build may use, so a runaway
allocation fails here with MemoryError instead of taking the machine's memory, and an alarm
ends a build that runs far past its time.
"""

from __future__ import annotations

import os
import pickle
import resource
import signal
import struct
import sys

HEADER = struct.Struct(">Q")


def read_frame(stream, limit: int):
    """One frame from a binary stream: None at the end of the stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    if size > limit:
        raise ValueError(f"a frame of {size} bytes")
    body = stream.read(size)
    if len(body) < size:
        return None
    return pickle.loads(body)


def write_frame(stream, value) -> int:
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(body)) + body)
    stream.flush()
    return len(body)


def resident_bytes(pid: int | str = "self") -> int:
    """Resident memory of a process (Linux: /proc); 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _virtual_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def lower_address_space(cap: int) -> int:
    """Lower the soft address-space limit to `cap`, never above what the host allows (a hard
    limit from `ulimit -v`, `prlimit --as` or a container) nor above the soft limit already
    set: a process may always lower its soft limit, never raise its hard one. The limit set."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    allowed = [limit for limit in (soft, hard) if limit != resource.RLIM_INFINITY]
    new = min([cap, *allowed])
    resource.setrlimit(resource.RLIMIT_AS, (new, hard))
    return new


class _TimeUp(Exception):
    pass


def _on_alarm(signum, frame):
    raise _TimeUp


def _answer(request: dict):
    """("ok", value) or ("error", (code, params)): what the parent turns into a result or a
    CalculatorError."""
    from calculator.core.errors import CalculatorError
    from calculator.models import meta

    try:
        op = request["op"]
        if op == "count":
            import json

            value = meta.count(json.loads(request["config_json"]), request["model_class"],
                               trust_remote_code=request.get("trust_remote_code", False),
                               source_dir=request.get("source_dir"))
        elif op == "count_hub_remote":
            value = meta.count_object(meta.hub_remote_config(request["repo"]), request["model_class"],
                                      trust_remote_code=True)
        elif op == "read_headers":  # a Hub checkpoint's index and headers, read and parsed here
            from calculator.models.safetensors import read_headers_here
            from calculator.models.hub import Deadline

            value = read_headers_here(request["repo"], request.get("endpoint", ""), request.get("token"),
                                      Deadline.until(request["until"]) if request.get("until") else None)
        elif op == "plan_device_map":  # the offloading chapter: model and placement built here
            from calculator.distributed.offload_plan import plan_here

            value = plan_here(request["config_json"], request["gpu_budgets"], request["cpu_budget"],
                              request["dtype"], request["quantization"])
        elif op == "model_types":
            value = sorted(meta.known_model_types())
        elif op == "ping":
            value = "pong"
        else:
            return "error", ("build_failed", {"architecture": "?", "detail": f"unknown request {op!r}"[:80]})
        return "ok", value
    except CalculatorError as error:
        return "error", (error.code, error.params)


def _warm_up() -> None:
    """Import what every build needs, and build one small model so the lazy parts of
    transformers are loaded before the first reader waits for them."""
    import json
    from pathlib import Path

    from calculator.models import meta

    tiny = Path(__file__).resolve().parent / "catalog" / "configs" / "gpt2.json"
    config = json.loads(tiny.read_text())
    config.update(n_layer=1, n_embd=8, n_head=1, vocab_size=16, n_positions=8)
    meta.count(config)


def serve(stdin, stdout, memory: int, seconds: float) -> int:
    """Answer requests, one frame each, until the end of `stdin` or a build past a limit."""
    if memory:
        # Room for the build's own memory, twice over: the parent's watch on the resident
        # size is the limit readers see; this only stops a runaway allocation at once.
        lower_address_space(_virtual_bytes() + 2 * memory)
    signal.signal(signal.SIGALRM, _on_alarm)
    write_frame(stdout, ("ready", resident_bytes()))
    while True:
        try:
            request = read_frame(stdin, 64 * 2**20)
        except (ValueError, pickle.UnpicklingError, EOFError):
            return 1
        if request is None:
            return 0
        if seconds:
            signal.alarm(int(seconds) + 5)  # the parent stops waiting at `seconds`
        try:
            reply = _answer(request)
        except MemoryError:
            reply = ("memory", None)
        except _TimeUp:
            reply = ("time", None)
        except Exception as exc:  # transformers failing in a way meta.py does not expect
            reply = ("error", ("build_failed", {"architecture": "?",
                                                "detail": f"{type(exc).__name__}: {exc}"[:240]}))
        finally:
            signal.alarm(0)
        try:
            write_frame(stdout, reply)
        except MemoryError:
            write_frame(stdout, ("memory", None))
        if reply[0] in ("memory", "time"):
            return 0  # whatever was half built is gone with this process


def main() -> int:
    if sys.argv[1:2] == ["--template"]:
        from calculator.models.worker_template import run_template

        os._exit(run_template(int(sys.argv[2]), _warm_up, serve))  # nothing to tear down: no second of it
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything printed by the libraries stays out of the frames
    memory = int(os.environ.get("CALCULATOR_WORKER_MEMORY_BYTES", "0"))
    seconds = float(os.environ.get("CALCULATOR_WORKER_SECONDS", "0"))
    try:
        _warm_up()
    except Exception as exc:  # a broken install: say so and stop
        write_frame(stdout, ("failed", f"{type(exc).__name__}: {exc}"[:200]))
        return 1
    return serve(stdin, stdout, memory, seconds)


if __name__ == "__main__":
    sys.exit(main())
