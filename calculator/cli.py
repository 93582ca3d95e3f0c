"""python -m calculator <command> ... [--json]

Human output is a table with explicit units; --json prints one object with sizes in bytes.
Bad input: exit code 2 and one line saying what is wrong and what to do, never a traceback.
The commands live in calculator/commands/, one module each.
"""

from __future__ import annotations

import argparse
import os
import sys

from .commands import COMMANDS
from .commands._common import parents
from .errors import CalculatorError

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line and use our exit code."""

    def error(self, message: str):  # noqa: D401 - argparse's API
        raise CalculatorError("cli_usage", detail=message, command=self.prog)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m calculator", description="Memory calculator for transformer models.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    shared = parents()
    for command in COMMANDS:
        command.register(commands, shared)
    return parser


def _refuse_empty_values(args) -> None:
    """An option given an empty or blank value (--gpu "") is refused, not read as left out."""
    for key, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            raise CalculatorError("cli_empty_value", option=key.replace("_", "-"))


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("CALCULATOR_BUILD_SPARE", "0")  # one command: no warm spare worker to pay for
    try:
        args = build_parser().parse_args(argv)
        if not getattr(args, "run", None):
            raise CalculatorError("cli_no_command")
        _refuse_empty_values(args)
        return args.run(args)
    except CalculatorError as error:
        print(f"error: {error.message('en')}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
