"""The calculator's commands as Model Context Protocol tools, without the protocol: each tool's
input schema (read from the command's own argparse options, names underscored), and a call that
runs the command's `--json` path in-process, so a tool answers exactly what
`python -m calculator <command> ... --json` prints, plus the guide section that explains it
(`guide_link`, every case value written out).

The arguments are values, never a command line: each one is checked against its own option
(its type, its choices, a model a catalog name or a Hub id) and set on the command's namespace
directly, so a value such as "--trust-remote-code" or "--help" is refused as a value and can
never become an option; argparse never parses what a client sends.

Bounded like the web page: a model is a catalog name or a Hub id (never a local path: the
same bounded resolution as the CLI, calculator/models/seam.py, with allow_local False), remote code
never runs (the server forbids it process-wide, seam.forbid_remote_code), the read tool takes
the text itself (never a file), and argument values are length-capped. The `mcp` SDK is imported
by calculator/cli/mcp_server.py only, so no other command pays for it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import sys
import threading

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
HIDDEN = {"help", "json", "trust_remote_code", "file", "units", "run", "markdown", "read_markdown", "lang"}  # never offered to a client
CASE_NAMES = ("model", "gpu", "dtype", "batch", "prompt", "new_tokens", "sequence", "context", "users", "tensor")
MAX_VALUE = 200  # characters of one argument value (the read tool's text has the reader's own cap)
MAX_LIST = 16


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    """The commands' parser, built once per process: calls only read it."""
    from calculator.cli.parser import build_parser

    return build_parser()


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
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


def _value(key: str, action: argparse.Action, value: object) -> object:
    """One value of an option, as the command would have stored it, or a refusal. A string is
    never an option (no leading '-') and never a control character; a number is a number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise CalculatorError("mcp_bad_value", name=key)
    if isinstance(value, str):
        if len(value) > MAX_VALUE or not value.isprintable():
            raise CalculatorError("mcp_bad_value", name=key)
        if value.lstrip().startswith("-"):
            raise CalculatorError("mcp_option_as_value", name=key)
    if action.type in (int, float):
        if isinstance(value, float) and action.type is int and not value.is_integer():
            raise CalculatorError("mcp_bad_value", name=key)
        try:
            value = action.type(value)
        except (TypeError, ValueError, OverflowError):
            raise CalculatorError("mcp_bad_value", name=key) from None
    elif action.type is not None:
        try:
            value = action.type(str(value))  # the option's own parser
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            raise CalculatorError("mcp_bad_value", name=key) from None
    elif not isinstance(value, str):
        value = str(value)
    if action.choices is not None and value not in action.choices:
        raise CalculatorError("mcp_bad_choice", name=key, choices=", ".join(str(c) for c in action.choices))
    if action.dest == "model":  # a catalog name or a Hub id: never a path, never an option
        from calculator.models.seam import check_model_name

        check_model_name(value)
    return value


def _namespace(command: str, parser: argparse.ArgumentParser, arguments: dict) -> argparse.Namespace:
    """The namespace the command runs with: its parser's defaults, then each argument checked
    and set as a value (an unknown name or an odd value is refused)."""
    options = _options(parser)
    args = argparse.Namespace()
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its options there only
        if action.dest in (argparse.SUPPRESS, "help") or action.default is argparse.SUPPRESS:
            continue
        default = action.default
        if isinstance(default, str) and action.type is not None:  # argparse parses string defaults too
            default = action.type(default)
        setattr(args, action.dest, list(default) if isinstance(default, list) else default)
    for name, default in parser._defaults.items():  # noqa: SLF001 - set_defaults (run, ...)
        setattr(args, name, default)
    # what the server fixes: JSON out, in English, no local file, no repository code (HIDDEN)
    vars(args).update(command=command, json=True, markdown=False, lang="en", lang_before_command=None,
                      trust_remote_code=False, allow_local=False)
    for key, value in arguments.items():
        if command == "read" and key == "text":
            continue
        action = options.get(key)
        if action is None:
            raise CalculatorError("mcp_unknown_argument", name=str(key)[:40], choices=", ".join(options))
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):  # noqa: SLF001
            if not isinstance(value, bool):
                raise CalculatorError("mcp_bad_value", name=key)
            setattr(args, action.dest, value if isinstance(action, argparse._StoreTrueAction) else not value)  # noqa: SLF001
            continue
        if action.nargs in ("+", "*"):
            values = value if isinstance(value, list) else [value]
            if not values or len(values) > MAX_LIST:
                raise CalculatorError("mcp_bad_value", name=key)
            setattr(args, action.dest, [_value(key, action, item) for item in values])
        else:
            setattr(args, action.dest, _value(key, action, value))
    missing = [key for key, action in options.items()
               if (action.required or (not action.option_strings and action.nargs is None))
               and getattr(args, action.dest, None) is None]
    if missing:
        raise CalculatorError("mcp_missing_argument", name=missing[0])
    return args


def call(name: str, arguments: dict | None) -> dict:
    """The tool's answer: the command's JSON, with `guide_link`. Refusals raise CalculatorError."""
    from calculator.cli.parser import refuse_empty_values

    if name not in TOOLS:
        raise CalculatorError("mcp_unknown_tool", name=str(name)[:40], choices=", ".join(TOOLS))
    if arguments is not None and not isinstance(arguments, dict):
        raise CalculatorError("mcp_bad_value", name="arguments")
    arguments = dict(arguments or {})
    command, slug, anchor, _ = TOOLS[name]
    args = _namespace(command, _subparsers()[command], arguments)
    refuse_empty_values(args, _parser())
    if command == "read":
        text = arguments.get("text")
        if not isinstance(text, str):
            raise CalculatorError("evidence_not_text")
        args.text = text
    printed = io.StringIO()
    with captured_stdout(printed):
        args.run(args)
    result = json.loads(printed.getvalue())
    if command == "read":
        from calculator.answers.evidence_text import section_of

        slug, anchor = section_of(result.get("kind"))
    case = {key: getattr(args, key) for key in CASE_NAMES if getattr(args, key, None) is not None}
    if "dtype" not in case and isinstance(result.get("dtype"), str):  # chosen by the command (serve: as shipped)
        case["dtype"] = result["dtype"]
    return {**result, "guide_link": guide_link(slug, anchor, {**case, **arguments})}


class _ThreadStdout(io.TextIOBase):
    """sys.stdout for a server whose tool calls run in threads: each thread that captures
    writes into its own buffer, every other write goes where stdout went before.
    contextlib.redirect_stdout swaps the one sys.stdout of the process, so two calls at once
    would write into each other's answers (and over stdio, into the protocol's stream)."""

    def __init__(self, fallback) -> None:
        self.fallback = fallback
        self.local = threading.local()

    def _target(self):
        buffer = getattr(self.local, "buffer", None)
        return self.fallback if buffer is None else buffer

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def writable(self) -> bool:
        return True

    @property
    def buffer(self):  # a write of bytes goes where text would
        return getattr(self._target(), "buffer", None)


_STDOUT_LOCK = threading.Lock()


@contextlib.contextmanager
def captured_stdout(buffer: io.StringIO):
    """What this thread prints goes into `buffer` (other threads' prints are left alone)."""
    with _STDOUT_LOCK:
        if not isinstance(sys.stdout, _ThreadStdout):
            sys.stdout = _ThreadStdout(sys.stdout)
        proxy = sys.stdout
    previous = getattr(proxy.local, "buffer", None)
    proxy.local.buffer = buffer
    try:
        yield buffer
    finally:
        proxy.local.buffer = previous


def guide_link(slug: str, anchor: str, arguments: dict, lang: str = "en") -> str:
    """The section that explains the answer, with the case values the call gave written out."""
    from calculator.answers.answer import section_link

    pairs = tuple((key, str(arguments[key])) for key in CASE_NAMES
                  if key in arguments and not isinstance(arguments[key], (list, dict, bool)))
    return section_link(slug, anchor, pairs, lang)
