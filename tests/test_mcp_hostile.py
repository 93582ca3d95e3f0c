"""The MCP server against a hostile client: every option name of the CLI sent as a value to
every tool, a Hub repository whose `auto_map` code writes a file, `--help` slipped into a
list, and a call stalled on a slow Hub beside a quick one. Nothing runs, nothing exits, and one
slow call holds no other."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio
import pytest

from calculator.cli import mcp_tools
from calculator.cli.mcp_tools import TOOLS, call
from calculator.core.errors import CalculatorError
from tests.conftest import ROOT

EVIL_REPO = "h/automap"


def _every_option_name() -> list[str]:
    """Every option string any command of the CLI declares (--trust-remote-code, --help, ...)."""
    from calculator.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = {flag for sub in commands.choices.values() for action in sub._actions for flag in action.option_strings}
    return sorted(names | {"--", "-", "--trust-remote-code=1", " --help"})


def _evil_repository(hub, marker: Path) -> None:
    """A repository whose config asks transformers to run its own code, which writes `marker`."""
    config = {"model_type": "evilconfig", "auto_map": {"AutoConfig": "evil.EvilConfig"}, "architectures": ["Evil"],
              "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 128}
    code = (f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
            "from transformers import PretrainedConfig\n"
            "class EvilConfig(PretrainedConfig):\n    model_type = 'evilconfig'\n")
    hub.add(EVIL_REPO, {"config.json": config, "evil.py": code})


def _string_arguments(tool: str) -> dict[str, argparse.Action]:
    command = TOOLS[tool][0]
    options = mcp_tools._options(mcp_tools._subparsers()[command])
    return {name: action for name, action in options.items()
            if not isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))}


def test_the_evil_repository_does_run_its_code_when_the_cli_is_told_to_trust_it(hub, tmp_path):
    """The fixture is live: the reader's own --trust-remote-code on the CLI runs the code."""
    from tests.test_cli import cli

    marker = tmp_path / "ran"
    _evil_repository(hub, marker)
    cli("estimate", EVIL_REPO, "--trust-remote-code", env={"HF_ENDPOINT": hub.url})
    assert marker.exists()


def test_every_option_name_sent_as_a_value_to_every_tool_is_refused_and_runs_nothing(hub, tmp_path):
    marker = tmp_path / "ran"
    _evil_repository(hub, marker)
    options = _every_option_name()
    sent = 0
    for tool in TOOLS:
        for name, action in _string_arguments(tool).items():
            for option in options:
                base = {"model": EVIL_REPO} if "model" in _string_arguments(tool) else {}
                if tool == "read":
                    base["text"] = "GPU KV cache size: 443,328 tokens"
                for value in (option, [option] if action.nargs in ("+", "*") else None,
                              ["float32", option] if action.nargs in ("+", "*") else None):
                    if value is None:
                        continue
                    with pytest.raises(CalculatorError) as refused:
                        call(tool, {**base, name: value})
                    assert refused.value.code in ("mcp_option_as_value", "mcp_bad_value"), (tool, name, value)
                    sent += 1
    assert sent > 1000 and not marker.exists()


def test_remote_code_is_refused_by_a_server_process_whatever_it_is_asked(hub, tmp_path, monkeypatch):
    from calculator.models import seam

    marker = tmp_path / "ran"
    _evil_repository(hub, marker)
    monkeypatch.setattr(seam, "_remote_code_forbidden", True)
    with pytest.raises(CalculatorError) as refused:
        seam.resolve(EVIL_REPO, trust_remote_code=True)
    assert refused.value.code == "remote_code_refused" and refused.value.message("fr") != refused.value.message("en")
    with pytest.raises(CalculatorError):  # without the code, transformers cannot build this type
        call("estimate", {"model": EVIL_REPO})
    assert not marker.exists()


@pytest.mark.parametrize("arguments,code", [
    ({"model": "gpt2", "dtypes": "float32; rm -rf /"}, None),  # a value, refused by the command itself
    ({"model": "gpt2", "model_class": "nope"}, "mcp_bad_choice"),
    ({"model": "../../etc/passwd"}, "bad_hub_id"),
    ({"model": "gpt2", "dtypes": []}, "mcp_bad_value"),
    ({"model": "gpt2", "dtypes": ["float32\n--help"]}, "mcp_bad_value"),
    ({}, "mcp_missing_argument"),
])
def test_values_are_checked_against_their_own_option(arguments, code):
    with pytest.raises(CalculatorError) as refused:
        call("estimate", arguments)
    assert code is None or refused.value.code == code


def test_numbers_and_flags_are_typed_values():
    assert call("inference", {"model": "gpt2", "batch": 2, "context": 128.0})["batch"] == 2
    for bad in ({"batch": "2; ls"}, {"batch": True}, {"batch": 2.5}, {"context": [128]}):
        with pytest.raises(CalculatorError):
            call("inference", {"model": "gpt2", **bad})
    with pytest.raises(CalculatorError):
        call("train", {"model": "gpt2", "offload_optimizer": "yes"})


async def _stdio(check, env: dict):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    import os

    server = StdioServerParameters(command=sys.executable, args=["-m", "calculator", "mcp"], cwd=str(ROOT),
                                   env={**os.environ, **env})
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await check(session)


def test_the_server_outlives_help_in_a_list_and_one_stalled_call_holds_no_other(hub):
    hub.add("org/slow", {})
    hub.hostile["org/slow/config.json"] = {"stall": 60}

    async def check(session):
        helped = await session.call_tool("estimate", {"model": "gpt2", "dtypes": ["float32", "--help"]})
        after = await session.call_tool("gpus", {})
        times = {}

        async def slow():
            await session.call_tool("estimate", {"model": "org/slow"})

        async def quick():
            await anyio.sleep(0.5)  # the slow call is on its way
            start = time.monotonic()
            times["gpus"] = (await session.call_tool("gpus", {}), time.monotonic() - start)
            group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            group.start_soon(quick)
        return helped, after, times["gpus"]

    helped, after, (quick, seconds) = anyio.run(_stdio, check, {"HF_ENDPOINT": hub.url})
    assert helped.is_error and "value, not an option" in helped.content[0].text
    assert not after.is_error and not quick.is_error
    assert seconds < 5  # answered beside the call stalled on the Hub (16 s), not after it
