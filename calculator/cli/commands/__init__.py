"""One module per command (as accelerate's `commands/` does): each declares
`register(commands, shared)`, which adds its subparser with the shared options it uses, and
a `run(args) -> int` that returns the exit code. The order here is the order of `--help`; the
`mcp` command, which serves the others as tools, is calculator/cli/mcp_server.py, registered
last by calculator/cli/main.py."""

from __future__ import annotations

from calculator.cli.commands import (accuracy, catalog, data_parallel, estimate, gpus, inference, llama_cpp, multi_gpu,
               offload, oom_message, pipeline, quantize, read, refresh_catalog, safetensors, serve, speed,
               tensor_parallel, train, zero_offload)

COMMANDS = (estimate, catalog, gpus, refresh_catalog, speed, data_parallel, inference, safetensors, quantize, pipeline,
            tensor_parallel, offload, zero_offload, llama_cpp, serve, multi_gpu, train, accuracy, oom_message, read)
