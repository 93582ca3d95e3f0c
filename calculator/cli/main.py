"""python -m calculator <command> ... [--json]

Human output is a table with explicit units; --json prints one object with sizes in bytes.
Bad input: exit code 2 and one line saying what is wrong and what to do, never a traceback.
The commands live in calculator/cli/commands/, one module each.
"""

from __future__ import annotations

import argparse
import os
import sys

from calculator.cli.commands import COMMANDS
from calculator.cli.commands._common import parents
from calculator.cli.usage import usage_reason
from calculator.core.errors import CalculatorError

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line and use our exit code."""

    def error(self, message: str):  # noqa: D401 - argparse's API
        raise CalculatorError("cli_usage", detail=usage_reason(message), command=self.prog)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m calculator", description="Memory calculator for transformer models.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    shared = parents()
    for command in COMMANDS:
        command.register(commands, shared)
    from calculator.answers.markdown import ANSWERING

    for name in ANSWERING:  # the paste-ready answer, on every answering command
        answering = commands.choices[name]
        answering.add_argument("--markdown", action="store_true", help="a short Markdown answer to paste")
    for command in commands.choices.values():  # every command refuses bad input in the reader's language
        command.add_argument("--lang", choices=("en", "fr"), default="en",
                             help="the language of error messages and of the --markdown answer")
    return parser


def _error_language(argv: list[str]) -> str:
    """--lang as typed, read before parsing: a refusal of the command line itself is in it too."""
    for item, after in zip(argv, [*argv[1:], ""]):
        if item.startswith("--lang="):
            return "fr" if item == "--lang=fr" else "en"
        if item == "--lang":
            return "fr" if after == "fr" else "en"
    return "en"


def _refuse_empty_values(args) -> None:
    """An option given an empty or blank value (--gpu "") is refused, not read as left out."""
    for key, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            raise CalculatorError("cli_empty_value", option=key.replace("_", "-"))


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
    for item in argv[1:]:  # the command line that reproduces it, without the answer's own options
        if skip:
            skip = False
        elif item in ("--markdown", "--json"):
            continue
        elif item == "--lang":
            skip = True
        elif not item.startswith("--lang="):
            kept.append(item)
    data = json.loads(printed.getvalue())
    print(markdown(answer_for(argv[0], data, tuple(kept), getattr(args, "model", None)), args.lang))
    return code


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("CALCULATOR_BUILD_SPARE", "0")  # one command: no warm spare worker to pay for
    lang = _error_language(argv if argv is not None else sys.argv[1:])
    try:
        args = build_parser().parse_args(argv)
        if not getattr(args, "run", None):
            raise CalculatorError("cli_no_command")
        _refuse_empty_values(args)
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
