"""`mcp [--http PORT]`: the calculator's answers as Model Context Protocol tools, over stdio (an
assistant starts it as a subprocess) or streamable HTTP bound to 127.0.0.1. calculator/cli/main.py
registers it after the commands it serves. The tools and their
answers are calculator/cli/mcp_tools.py's; this module only speaks the protocol, with the official
`mcp` SDK, imported here and nowhere else so the other commands do not load it."""

from __future__ import annotations

import json

from calculator.cli.commands._common import add_command

SERVER_NAME = "model-memory-calculator"


def register(commands, shared) -> None:
    p = add_command(commands, "mcp", shared, (), run,
                    help="serve the calculator as MCP tools (stdio, or streamable HTTP on 127.0.0.1 with --http)")
    p.add_argument("--http", type=int, default=None, metavar="PORT",
                   help="serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio")


# One call's bound. Each slow part below it is bounded already (a Hub question 16 s, a model
# build 20 s in its worker): this is the ceiling of one call, so a client always hears back.
TOOL_SECONDS = 60.0


def build_server():
    import anyio
    import mcp_types as types
    from mcp.server import Server

    from calculator.cli.mcp_tools import call, tool_list
    from calculator.core.errors import CalculatorError
    from calculator.core.reasons import library
    from calculator.models.seam import forbid_remote_code

    forbid_remote_code()  # whatever a client sends, this process runs no repository's code
    tools = [types.Tool(name=t["name"], description=t["description"], input_schema=t["input_schema"])
             for t in tool_list()]

    def refusal(error: CalculatorError) -> types.CallToolResult:
        # the same one-line message as the CLI's, for the model to read
        return types.CallToolResult(content=[types.TextContent(text=f"error: {error.message('en')}")], is_error=True)

    def answer(name: str, arguments) -> dict | CalculatorError:
        """The call, in a worker thread; anything it raises becomes a refusal, never the
        server's end (argparse's SystemExit, a RecursionError, a library's bug)."""
        try:
            return call(name, arguments)
        except CalculatorError as error:
            return error
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the server outlives any call (RecursionError too)
            return CalculatorError("mcp_tool_failed", detail=library("python", type(exc).__name__))

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params) -> types.CallToolResult:
        # Off the event loop: a call waiting on a slow Hub or a build holds its own thread only.
        with anyio.move_on_after(TOOL_SECONDS) as scope:
            result = await anyio.to_thread.run_sync(answer, params.name, params.arguments, abandon_on_cancel=True)
        if scope.cancelled_caught:
            return refusal(CalculatorError("mcp_tool_too_slow", seconds=f"{TOOL_SECONDS:g}"))
        if isinstance(result, CalculatorError):
            return refusal(result)
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(result, ensure_ascii=False))],
                                    structured_content=result)

    return Server(SERVER_NAME, version="1", on_list_tools=list_tools, on_call_tool=call_tool,
                  instructions="Memory figures for transformer models on GPUs (load, inference, training, "
                               "serving, offloading, quantization, llama.cpp) and a reader for pasted logs. "
                               "Sizes are in bytes; each result has the guide section that explains it.")


def run(args) -> int:
    import anyio

    from calculator.core.errors import CalculatorError

    if args.http is not None and not 1 <= args.http <= 65535:  # said before the SDK is imported (seconds)
        raise CalculatorError("mcp_bad_port", port=args.http)
    server = build_server()
    if args.http is not None:
        import uvicorn

        uvicorn.run(server.streamable_http_app(host="127.0.0.1"), host="127.0.0.1", port=args.http,
                    log_level="warning")
        return 0

    async def serve_stdio() -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve_stdio)
    return 0
