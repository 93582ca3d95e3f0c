"""No reader's text can hold the server: every regular expression of the engine and the guide
is linear in what it reads. Each module-level pattern is fed long runs of its own literal
pieces (the shape that made `max_.*(len|...)$` quadratic: a 64,000-character key held the
server 24 s), config keys of 2 MiB go through the config checks, and the evidence readers take
their whole 512 KiB."""

from __future__ import annotations

import contextlib
import importlib
import json
import pkgutil
import re
import signal
import time

import pytest

import calculator
import guide
from calculator.core.limits import MAX_EVIDENCE_BYTES

SWEEP_CHARS = 256 * 1024  # a quadratic pattern takes minutes on this, a linear one milliseconds
SECONDS = 1.0


class _TooSlow(Exception):
    pass


@contextlib.contextmanager
def at_most(seconds: float, what: str):
    """Fail (instead of hanging the suite) when the block runs longer than `seconds`."""
    def stop(*_):
        raise _TooSlow(what)

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _TooSlow:
        pytest.fail(f"{what} took more than {seconds} s: not linear")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _patterns() -> dict[str, re.Pattern]:
    """Every compiled pattern a module of calculator/ or guide/ holds, alone or in a tuple,
    list or dict (one level: the evidence readers' tables, the config size groups)."""
    found = {}
    for package in (calculator, guide):
        for module_info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if module_info.name.endswith("__main__"):
                continue
            module = importlib.import_module(module_info.name)
            for name, value in vars(module).items():
                items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else [value]
                for index, item in enumerate(items):
                    for pattern in (item if isinstance(item, tuple) else (item,)):
                        if isinstance(pattern, re.Pattern):
                            found[f"{module_info.name}.{name}[{index}]"] = pattern
    return found


PATTERNS = _patterns()


def _pieces(pattern: re.Pattern) -> set[str]:
    """Runs of the literal text a pattern is written with, and a few plain characters."""
    source = pattern.pattern.replace("\\s", " ").replace("\\d", "1").replace("\\.", ".")
    return {piece for piece in re.findall(r"[A-Za-z0-9_ .:,'=#|-]{2,}", source) if piece.strip()} | {
        "a", "_", "1", " ", "|", "1.5 ", "a_", "\u00a0"}


def test_the_sweep_sees_the_patterns_that_read_readers_text():
    for name in ("calculator.models.configs.SIZE_PATTERNS", "calculator.memory.oom_message._REQUEST",
                 "calculator.answers.evidence_logs.VLLM_PATTERNS", "calculator.core.typography._SPACE_BEFORE",
                 "calculator.models.library_reasons._PATTERNS"):
        assert any(key.startswith(name) for key in PATTERNS), name
    assert len(PATTERNS) > 80


def _slow_on(pattern: re.Pattern, text: str) -> bool:
    def stop(*_):
        raise _TooSlow()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        pattern.search(text)
        pattern.match(text)
        return False
    except _TooSlow:
        return True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_every_pattern_is_linear_on_long_runs_of_its_own_pieces():
    offenders = []
    for name, pattern in sorted(PATTERNS.items()):
        for piece in sorted(_pieces(pattern)):
            if _slow_on(pattern, (piece * (SWEEP_CHARS // len(piece) + 1))[:SWEEP_CHARS]):
                offenders.append(f"{name} on {piece[:20]!r} x {SWEEP_CHARS:,}")
                break
    assert not offenders, f"patterns slower than {SECONDS} s (not linear): {offenders}"


@pytest.mark.parametrize("piece", ["max_", "num_", "_", "max_len_", "position_", "a"])
def test_a_config_with_a_2_mib_key_is_checked_within_a_second(piece):
    """The longest key a config file can hold (the file is capped at 2 MiB) is no size key:
    checked, and left alone, at once."""
    from calculator.models.configs import MAX_CONFIG_BYTES, check_config, parse_config_text, without_runtime_keys

    key = (piece * (MAX_CONFIG_BYTES // len(piece)))[:MAX_CONFIG_BYTES - 100] + "_tokens"
    raw = json.dumps({"model_type": "llama", key: 5}).encode()
    assert len(raw) <= MAX_CONFIG_BYTES
    start = time.monotonic()
    with at_most(SECONDS, f"a config with a {len(key):,}-character key"):
        check_config(without_runtime_keys(parse_config_text(raw)))
    assert time.monotonic() - start < SECONDS


def test_an_out_of_memory_message_under_a_long_traceback_is_read():
    from calculator.memory.oom_message import read

    message = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity "
               "of 79.15 GiB of which 1.20 GiB is free. Of the allocated memory 75.68 GiB is allocated by PyTorch, "
               "and 1.74 GiB is reserved by PyTorch but unallocated.")
    for after in (30_000, MAX_EVIDENCE_BYTES - len(message) - 10):
        text = message + "\n" + ("  File \"train.py\", line 12, in step\n" * (after // 36 + 1))[:after]
        with at_most(2 * SECONDS, "an OOM message with a long tail"):
            reading = read(text)
        assert reading.report is not None and reading.report.requested == round(1.96 * 2**30)


@pytest.mark.parametrize("piece", [" ", "|", "1", "MiB ", "| 0 ", "Tried to allocate ", "GPU KV cache size: "])
def test_the_evidence_reader_takes_its_whole_512_kib_in_bounded_time(piece):
    from calculator.answers.evidence import read
    from calculator.core.errors import CalculatorError

    text = (piece * (MAX_EVIDENCE_BYTES // len(piece) + 1))[:MAX_EVIDENCE_BYTES - 1]
    with at_most(3 * SECONDS, f"the evidence reader on {piece!r}"):
        with contextlib.suppress(CalculatorError):
            read(text)
