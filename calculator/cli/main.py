"""python -m calculator <command> ... [--json]

Human output is a table with explicit units; --json prints one object with sizes in bytes.
Bad input: exit code 2 and one line saying what is wrong and what to do, never a traceback.
The commands live in calculator/cli/commands/, one module each.
"""

from __future__ import annotations

import argparse
import os
import sys

from calculator.cli import mcp_server, parser
from calculator.core.errors import CalculatorError

EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: the commands, and the MCP server that serves them as tools."""
    return parser.build_parser(extra_commands=(mcp_server,))


def _error_language(argv: list[str]) -> str:
    """--lang as typed, read before parsing: a refusal of the command line itself is in it too."""
    for item, after in zip(argv, [*argv[1:], ""]):
        if item.startswith("--lang="):
            return "fr" if item == "--lang=fr" else "en"
        if item == "--lang":
            return "fr" if after == "fr" else "en"
    return "en"


def _answer(args, argv: list[str]) -> int:
    """--markdown: the command's own JSON, written as the answer a support engineer would post."""
    import contextlib
    import io
    import json

    from calculator.answers.markdown import answer_for, markdown

    args.json = True
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = args.run(args)
    kept, skip = [], False
    after_command = argv[argv.index(args.command) + 1:]  # `--lang fr` may come before the command
    for item in after_command:  # the command line that reproduces it, without the answer's own options
        if skip:
            skip = False
        elif item in ("--markdown", "--json"):
            continue
        elif item == "--lang":
            skip = True
        elif not item.startswith("--lang="):
            kept.append(item)
    data = json.loads(printed.getvalue())
    print(markdown(answer_for(args.command, data, tuple(kept), getattr(args, "model", None)), args.lang))
    return code


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("CALCULATOR_BUILD_SPARE", "0")  # one command: no warm spare worker to pay for
    lang = _error_language(argv if argv is not None else sys.argv[1:])
    try:
        command_line = build_parser()
        args = command_line.parse_args(argv)
        args.lang = getattr(args, "lang", None) or args.lang_before_command or "en"
        if not getattr(args, "run", None):
            raise CalculatorError("cli_no_command")
        parser.refuse_empty_values(args, command_line)
        if getattr(args, "markdown", False):
            return _answer(args, argv if argv is not None else sys.argv[1:])
        return args.run(args)
    except CalculatorError as error:
        label = "erreur :" if lang == "fr" else "error:"
        print(label, " ".join(error.message(lang).splitlines()), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("erreur : interrompu." if lang == "fr" else "error: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
