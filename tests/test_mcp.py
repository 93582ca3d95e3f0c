"""The MCP server, driven by the official SDK's own client: over stdio it lists the tools with
the CLI's option names and answers with the CLI's own JSON (plus the guide link); one round trip
over streamable HTTP on 127.0.0.1; refusals come back as tool errors, never a crash; and the
other commands do not import the SDK."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import anyio
import pytest

from calculator.cli.mcp_tools import TOOLS, call, tool_list
from tests.conftest import ROOT


def cli_json(*argv: str) -> dict:
    """The command's JSON, run in this process (tests/cli_runner.py); the MCP server itself runs
    as a real process in the stdio test."""
    from tests.cli_runner import run_cli

    done = run_cli(*argv, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def _stdio_session(check):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(command=sys.executable, args=["-m", "calculator", "mcp"], cwd=str(ROOT))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await check(session)


def test_stdio_client_lists_the_tools_and_gets_the_clis_numbers():
    async def check(session):
        listed = await session.list_tools()
        serve = await session.call_tool("serve", {"model": "llama-3.1-8b", "gpu": "h100", "context": 8192})
        estimate = await session.call_tool("estimate", {"model": "gpt2", "dtypes": ["float32", "bfloat16"]})
        bad = await session.call_tool("serve", {"model": "llama-3.1-8b", "gpu": "no-such-card"})
        return listed, serve, estimate, bad

    listed, serve, estimate, bad = anyio.run(_stdio_session, check)
    names = {tool.name for tool in listed.tools}
    assert names == set(TOOLS) >= {"estimate", "inference", "train", "serve", "offload", "quantize", "llama_cpp",
                                   "read", "catalog", "gpus"}
    serve_schema = next(t for t in listed.tools if t.name == "serve").input_schema
    assert {"gpu_memory_utilization", "max_num_batched_tokens", "kv_dtype"} <= set(serve_schema["properties"])
    assert "trust_remote_code" not in serve_schema["properties"]
    result = serve.structured_content
    link = result.pop("guide_link")
    assert result == cli_json("serve", "llama-3.1-8b", "--gpu", "h100", "--context", "8192")
    assert link.endswith("/serving?lang=en&model=llama-3.1-8b&gpu=h100&dtype=bfloat16&context=8192&users=1"
                         "#serving-memory")
    rows = estimate.structured_content["rows"]
    assert rows == cli_json("estimate", "gpt2", "--dtypes", "float32", "bfloat16")["rows"]
    assert bad.is_error and bad.content[0].text.startswith("error: ") and "\n" not in bad.content[0].text


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_one_round_trip_over_streamable_http():
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "calculator", "mcp", "--http", str(port)], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None, server.stderr.read().decode()
            time.sleep(0.2)

        async def round_trip():
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool("gpus", {})

        result = anyio.run(round_trip)
        gpus = result.structured_content
        assert gpus.pop("guide_link").endswith("/memory-estimate?lang=en#units")
        assert gpus == cli_json("gpus")
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_tools_refuse_what_the_page_refuses():
    from calculator.core.errors import CalculatorError

    for arguments in ({"model": str(ROOT / "tests" / "configs" / "tiny-llama.json")},  # a local path
                      {"model": "gpt2", "trust_remote_code": True},  # not offered
                      {"model": "gpt2", "dtypes": ["float32"] * 100},
                      {"model": {"nested": "object"}}):
        with pytest.raises(CalculatorError):
            call("estimate", arguments)
    with pytest.raises(CalculatorError):
        call("shell", {})
    read = call("read", {"text": "GPU KV cache size: 443,328 tokens", "model": "llama-3.1-8b", "gpu": "h100"})
    assert read["comparison"]["findings"][1]["code"] == "kv_matches_defaults"


def test_every_tool_schema_uses_the_clis_option_names():
    for tool in tool_list():
        assert tool["input_schema"]["type"] == "object"
        assert all("-" not in name for name in tool["input_schema"]["properties"])


def test_other_commands_do_not_import_the_sdk():
    code = "import sys, calculator.cli.main as c; c.main(['gpus', '--json']); print('mcp' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=120, check=True)
    assert done.stdout.decode().strip().endswith("False")
