"""The calculator's commands as Model Context Protocol tools, without the protocol: each tool's
input schema (read from the command's own argparse options, names underscored), and a call that
builds the command line from the arguments and runs the command's `--json` path in-process, so
a tool answers exactly what `python -m calculator <command> ... --json` prints, plus the guide
section that explains it (`guide_link`, every case value written out).

Bounded like the web page: a model is a catalog name or a Hub id (never a local path: the
same bounded resolution as the CLI, calculator/models/seam.py, with allow_local False), remote code
never runs, the read tool takes the text itself (never a file), and argument values are
length-capped before argparse sees them. The `mcp` SDK is imported by calculator/cli/commands/mcp.py
only, so no other command pays for it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
from urllib.parse import urlencode

from calculator.core.errors import CalculatorError

# tool name: (command, chapter slug, section anchor, what it answers)
TOOLS = {
    "estimate": ("estimate", "estimator", "estimate", "Memory to load a model, per precision (weights, largest "
                 "layer, Adam training, rule of thumb)."),
    "inference": ("inference", "memory-estimate", "inference-overhead", "Peak GPU memory of running a batch of "
                  "sequences (weights, KV cache, activations); with gpu: fits, largest batch and context."),
    "train": ("train", "fine-tuning", "training-memory", "Memory of one training step per GPU (full, LoRA, QLoRA; "
              "ZeRO, offloading); with gpu: fits, largest micro-batch, fewest GPUs."),
    "serve": ("serve", "serving", "serving-memory", "How vLLM or SGLang splits each card: KV cache pool, tokens, "
              "concurrent sequences, GPUs needed for the users."),
    "offload": ("offload", "cpu-offloading", "device-map", "device_map='auto' placement: what goes on the GPU, "
                "the CPU and disk, and the CPU memory needed."),
    "quantize": ("quantize", "quantization", "formats", "Bytes of the model in each quantization format (bnb, "
                 "GPTQ, AWQ, GGUF, float8)."),
    "llama_cpp": ("llama-cpp", "cpu-offloading", "llama-cpp", "llama.cpp: the largest -ngl that fits, GPU and CPU "
                  "memory, decoding speed, the command line."),
    "read": ("read", "serving", "engine-settings", "Read a pasted vLLM / SGLang log, nvidia-smi, accelerate "
             "estimate-memory, memory_summary() or CUDA OOM message, and compare it with a case."),
    "catalog": ("catalog", "estimator", "estimate", "The bundled models (names usable as model)."),
    "gpus": ("gpus", "memory-estimate", "units", "The GPU cards (keys usable as gpu) and their memory."),
}
READ_PAGES = {"oom-message": ("oom", "oom-message"), "nvidia-smi": ("oom", "find-memory"),
              "memory-summary": ("oom", "find-memory"), "accelerate-estimate": ("memory-estimate", "units")}
HIDDEN = {"help", "json", "trust_remote_code", "file", "units", "run", "markdown", "lang"}  # never offered to a client
CASE_NAMES = ("model", "gpu", "dtype", "batch", "prompt", "new_tokens", "sequence", "context", "users", "tensor")
MAX_VALUE = 200  # characters of one argument value (the read tool's text has the reader's own cap)
MAX_LIST = 16
DEFAULT_GUIDE_URL = "http://localhost:8501"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from calculator.cli.main import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The command's options by argument name: the first long flag, underscored
    (--gpu-memory-utilization: gpu_memory_utilization), or a positional's name."""
    named = {}
    for action in parser._actions:
        if action.dest in HIDDEN or action.dest == argparse.SUPPRESS:
            continue
        flags = [f for f in action.option_strings if f.startswith("--")]
        named[flags[0][2:].replace("-", "_") if flags else action.dest] = action
    return named


def _schema_of(action: argparse.Action) -> dict:
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        schema: dict = {"type": "boolean"}
    elif action.type is int:
        schema = {"type": "integer"}
    elif action.type is float:
        schema = {"type": "number"}
    else:
        schema = {"type": "string"}
    if action.choices:
        schema["enum"] = [str(c) for c in action.choices]
    if action.nargs in ("+", "*"):
        schema = {"type": "array", "items": schema, "maxItems": MAX_LIST}
    if action.help and action.help != argparse.SUPPRESS:
        schema["description"] = action.help.replace("%%", "%")
    if action.default not in (None, False, argparse.SUPPRESS) and not isinstance(action.default, list):
        schema["default"] = action.default
    return schema


def tool_list() -> list[dict]:
    """[{name, description, input_schema}] for every tool, options as the command declares them."""
    parsers = _subparsers()
    tools = []
    for name, (command, _, _, description) in TOOLS.items():
        properties, required = {}, []
        for argument, action in _options(parsers[command]).items():
            properties[argument] = _schema_of(action)
            if action.required or not action.option_strings:
                required.append(argument)
        if command == "read":
            properties["text"] = {"type": "string", "description": "the log, table or message to read"}
            required.append("text")
        tools.append({"name": name, "description": description,
                      "input_schema": {"type": "object", "properties": properties, "required": required,
                                       "additionalProperties": False}})
    return tools


def _argv(command: str, parser: argparse.ArgumentParser, arguments: dict) -> list[str]:
    """The command line the arguments stand for; an unknown name or an odd value is refused."""
    options = _options(parser)
    argv, positionals = [command], []
    for key, value in arguments.items():
        if command == "read" and key == "text":
            continue
        action = options.get(key)
        if action is None:
            raise CalculatorError("mcp_unknown_argument", name=str(key)[:40], choices=", ".join(options))
        values = value if isinstance(value, list) else [value]
        if len(values) > MAX_LIST or any(not isinstance(v, (str, int, float, bool)) or len(str(v)) > MAX_VALUE
                                         for v in values):
            raise CalculatorError("mcp_bad_value", name=key)
        if isinstance(action, argparse._StoreTrueAction):
            if value is True:
                argv.append(action.option_strings[0])
            elif value is not False:
                raise CalculatorError("mcp_bad_value", name=key)
            continue
        texts = [str(v) for v in values]
        if not action.option_strings:
            positionals += texts
        else:
            argv += [action.option_strings[0], *texts]
    return argv + ["--json"] + (["--"] + positionals if positionals else [])


def call(name: str, arguments: dict | None) -> dict:
    """The tool's answer: the command's JSON, with `guide_link`. Refusals raise CalculatorError."""
    from calculator.cli.main import build_parser

    if name not in TOOLS:
        raise CalculatorError("mcp_unknown_tool", name=str(name)[:40], choices=", ".join(TOOLS))
    arguments = dict(arguments or {})
    command, slug, anchor, _ = TOOLS[name]
    argv = _argv(command, _subparsers()[command], arguments)
    args = build_parser().parse_args(argv)
    args.allow_local = False
    if command == "read":
        text = arguments.get("text")
        if not isinstance(text, str):
            raise CalculatorError("evidence_not_text")
        args.text = text
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        args.run(args)
    result = json.loads(printed.getvalue())
    if command == "read":
        slug, anchor = READ_PAGES.get(result.get("kind"), (slug, anchor))
    case = {key: getattr(args, key) for key in CASE_NAMES if getattr(args, key, None) is not None}
    if "dtype" not in case and isinstance(result.get("dtype"), str):  # chosen by the command (serve: as shipped)
        case["dtype"] = result["dtype"]
    return {**result, "guide_link": guide_link(slug, anchor, {**case, **arguments})}


def guide_link(slug: str, anchor: str, arguments: dict, lang: str = "en") -> str:
    """The section that explains the answer, with the case values the call gave written out."""
    base = os.environ.get("GUIDE_URL", DEFAULT_GUIDE_URL).rstrip("/")
    pairs = [("lang", lang)] + [(key, str(arguments[key])) for key in CASE_NAMES
                                if key in arguments and not isinstance(arguments[key], (list, dict, bool))]
    return f"{base}/{slug}?{urlencode(pairs)}#{anchor}"
