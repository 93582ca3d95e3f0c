"""Every command, fed what people mistype: an unknown model or card, negative or absurd numbers,
NaN, an unknown choice, an empty value, a 10 MB argument, undecodable bytes, a folder or
/etc/passwd as a config. Each answers with exit code 2 and one line in the language asked
(--lang fr here; English in tests/test_hostile_cli.py), never a traceback (tests/cli_runner.py
lets an escaped exception fail the test), within a few seconds.

The cases are made from the parser itself (every option of every command, by its type), so an
option added tomorrow is fed the same inputs."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import pytest

from calculator.cli.main import build_parser
from tests.cli_runner import run_cli
from tests.conftest import ROOT
from tests.test_messages_in_french import french_is_whole, plain

M = "gpt2"
# A command line each command accepts; each case changes one of its values.
BASE = {
    "estimate": [M], "gpus": [], "speed": [M, "--gpu", "h100"],
    "data-parallel": [M, "--gpu", "h100", "--samples", "10"], "inference": [M, "--batch", "1", "--context", "10"],
    "safetensors": ["org/model"], "quantize": [M, "--gpu", "h100"], "pipeline": [M, "--gpus", "2"],
    "tensor-parallel": [M, "--degree", "2"], "offload": [M], "zero-offload": [M, "--gpu", "h100"], "llama-cpp": [M],
    "serve": [M, "--gpu", "h100"], "multi-gpu": [M, "--gpu", "h100"], "train": [M],
    "oom-message": [], "read": [], "accuracy": [], "mcp": [],
}
NOT_RUN = {"catalog", "refresh-catalog"}  # no value to get wrong; refresh-catalog rewrites the catalog
SKIPPED = {"help", "lang", "json", "markdown", "trust_remote_code", "units", "command"}
# Values a command reads only in another mode, so that this one accepts them unread.
UNREAD = {("serve", "--slots"), ("serve", "--gpu-layers")}  # llama.cpp's options; BASE serves with vLLM
ENV = {"HF_HUB_OFFLINE": "1"}  # an unknown name is not looked for on a network the tests do not have
BIG = "x" * (10 * 2**20)
SECONDS = 10  # per command, on the shared 2-core machine (most take well under one)


def _values(action: argparse.Action) -> list[str]:
    if action.type in (int, float):
        return ["-1", "9" * 400, "1e30", "nan"]
    if action.choices:
        return ["nope", ""]
    if action.dest in ("model", "repo"):
        return ["", "nosuch-model-xyz", "/etc", "/etc/passwd", BIG, "\udcff\udcfe"]
    return ["", "nosuch-thing-xyz", BIG, "\udcff\udcfe"]


def _cases() -> list[tuple[str, list[str]]]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == set(BASE) | NOT_RUN, "a new command: give it a BASE line"
    cases = []
    for name, command in commands.choices.items():
        if name in NOT_RUN:
            continue
        for action in command._actions:
            if action.dest in SKIPPED or action.nargs == 0 or (name, (action.option_strings or [""])[0]) in UNREAD:
                continue
            for value in _values(action):
                argv = list(BASE[name])
                if not action.option_strings:  # the positional: the first value of BASE
                    argv = [value, *argv[1:]]
                elif action.option_strings[0] in argv:
                    argv[argv.index(action.option_strings[0]) + 1] = value
                else:
                    argv += [action.option_strings[0], value]
                cases.append((name, argv))
    return cases


CASES = _cases()


def _id(case) -> str:
    name, argv = case
    return " ".join([name, *(a if len(a) < 20 else f"<{len(a)} chars>" for a in argv)]).encode("ascii", "replace").decode()


def refused_in(lang: str, *argv: str, stdin: bytes = b"") -> str:
    start = time.perf_counter()
    out = run_cli(*argv, "--lang", lang, stdin=stdin, env=ENV)
    took = time.perf_counter() - start
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout[:300], out.stderr[:300])
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and len(lines[0]) < 4000, out.stderr[:500]
    assert lines[0].startswith("erreur :" if lang == "fr" else "error:"), lines[0][:300]
    if lang == "fr":
        french_is_whole(lines[0])
    assert took < SECONDS, f"{took:.1f} s"
    return lines[0]


def test_every_command_is_fed_bad_input():
    assert len(CASES) > 300 and {name for name, _ in CASES} == set(BASE)


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_bad_values_are_refused_in_french_on_one_line(case):
    name, argv = case
    refused_in("fr", name, *argv)


HAND_CASES = [  # what the generated cases cannot make: stdin, several values, a real file's bytes
    (("estimate", M, "--gpu", "nosuch-card"), b"", "unknown_gpu"),
    (("estimate", M, "--gpu", "custom:0GiB"), b"", "bad_custom_gpu"),
    (("estimate", M, "--dtypes", "float9"), b"", "unknown_dtype"),
    (("estimate", "/etc"), b"", "config_missing_in_folder"),
    (("read", "/etc"), b"", "evidence_file"),
    (("read", "-"), b"\xff\xfe\x00garbage", "evidence_not_text"),
    (("read", "-"), b"", "evidence_empty"),
    (("read", "-"), BIG.encode(), "evidence_too_long"),
    (("oom-message",), b"\xff\xfe\x00garbage", "oom_not_recognised"),
    (("accuracy", "--results", "/etc/passwd"), b"", "results_folder_missing"),
    (("mcp", "--http", "0"), b"", "mcp_bad_port"),
    (("nosuch-command",), b"", "cli_usage"),
    (("catalog", BIG), b"", "cli_usage"),  # argparse's "unrecognized arguments: <10 MB>", cut
    ((), b"", "cli_no_command"),  # `--lang fr` alone: the language before any command
    (("estimate", ""), b"", "cli_empty_argument"),  # named MODEL, as the usage line names it
    (("safetensors", " "), b"", "cli_empty_argument"),
    (("serve", M, "--gpu", "l4", "--engine", "llama.cpp", "--dtype", "float16"), b"", "serve_option_other_engine"),
    (("serve", M, "--gpu", "l4", "--engine", "llama.cpp", "--users", "8"), b"", "serve_option_other_engine"),
    (("serve", M, "--gpu", "l4", "--slots", "8"), b"", "serve_option_other_engine"),  # llama.cpp's, given to vLLM
]


@pytest.mark.parametrize("lang", ["en", "fr"])
@pytest.mark.parametrize("argv, stdin, code", HAND_CASES, ids=[c[2] for c in HAND_CASES])
def test_hand_made_bad_input_gets_its_own_message(argv, stdin, code, lang):
    from calculator.core.messages import text

    line = plain(refused_in(lang, *argv, stdin=stdin))
    template = plain(text(f"error.{code}", lang))
    first_words = template.split("{")[0].strip() or template.split("}")[1].split("{")[0].strip()
    assert first_words[:20] in line, (first_words, line[:300])


def test_the_refusal_names_what_was_given():
    """The argument or option the reader typed is the one the line names."""
    assert "MODEL" in refused_in("en", "estimate", "") and "--model" not in refused_in("en", "estimate", "")
    line = refused_in("fr", "serve", M, "--gpu", "l4", "--engine", "llama.cpp", "--kv-cache-dtype", "fp8")
    assert "--kv-cache-dtype" in line and "llama.cpp" in line
    assert "--no-kv-unified" in refused_in("en", "serve", M, "--gpu", "l4", "--engine", "sglang", "--no-kv-unified")


def test_the_language_may_come_before_the_command():
    """`--lang fr` before the command is read as after it: the answer and its refusals in French."""
    answer = run_cli("--lang", "fr", "estimate", M, "--markdown", env=ENV)
    assert answer.returncode == 0 and "paramètres" in answer.stdout, answer.stderr[:300]
    assert "python -m calculator estimate gpt2" in answer.stdout  # the command that reproduces it
    assert run_cli("--lang", "fr", "estimate", M, "--gpu", "nosuch", env=ENV).stderr.startswith("erreur :")
    own = run_cli("estimate", M, "--markdown", "--lang", "en", env=ENV)
    assert own.returncode == 0 and "parameters" in own.stdout


def test_llama_cpp_takes_its_own_options():
    out = run_cli("serve", M, "--gpu", "l4", "--engine", "llama.cpp", "--slots", "2", "--cache-type", "q8_0",
                  "--gpu-layers", "10", "--no-kv-unified", env=ENV)
    assert out.returncode == 0 and "-np 2" in out.stdout and "q8_0" in out.stdout, out.stderr[:300]


def test_undecodable_bytes_on_a_real_command_line():
    """What the shell passes: bytes that are not UTF-8, shown escaped on a real stderr."""
    out = subprocess.run([sys.executable, "-m", "calculator", "estimate", os.fsencode("\udcff\udcfe"), "--lang", "fr"],
                         cwd=ROOT, env={**os.environ, **ENV}, capture_output=True, timeout=120)
    assert out.returncode == 2 and b"Traceback" not in out.stderr
    line = out.stderr.decode("utf-8")
    assert line.count("\n") == 1 and line.startswith("erreur :") and "\\udcff\\udcfe" in line
