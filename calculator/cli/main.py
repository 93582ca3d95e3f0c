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
    # --lang before the command too, so `python -m calculator --lang fr` alone is answered in French
    parser.add_argument("--lang", dest="lang_before_command", choices=("en", "fr"), default=None,
                        help="the language of error messages (also accepted after the command)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    shared = parents()
    for command in COMMANDS:
        command.register(commands, shared)
    from calculator.answers.markdown import ANSWERING

    for name in ANSWERING:  # the paste-ready answer, on every answering command
        answering = commands.choices[name]
        answering.add_argument("--markdown", action="store_true", help="a short Markdown answer to paste")
    for command in commands.choices.values():  # every command refuses bad input in the reader's language
        command.add_argument("--lang", choices=("en", "fr"), default=None,
                             help="the language of error messages and of the --markdown answer (default en)")
    return parser


def _error_language(argv: list[str]) -> str:
    """--lang as typed, read before parsing: a refusal of the command line itself is in it too."""
    for item, after in zip(argv, [*argv[1:], ""]):
        if item.startswith("--lang="):
            return "fr" if item == "--lang=fr" else "en"
        if item == "--lang":
            return "fr" if after == "fr" else "en"
    return "en"


def _command_actions(parser: argparse.ArgumentParser, command: str) -> dict[str, argparse.Action]:
    """The arguments of one command, by the name its value is stored under."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its subcommands there only
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return {a.dest: a for a in action.choices[command]._actions}  # noqa: SLF001
    return {}


def _refuse_empty_values(args, parser: argparse.ArgumentParser) -> None:
    """An argument given an empty or blank value (--gpu "", MODEL "") is refused, not read as
    left out; a positional argument is named as the usage line names it, not as an option."""
    actions = _command_actions(parser, args.command)
    for key, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            action = actions.get(key)
            if action is not None and not action.option_strings:
                raise CalculatorError("cli_empty_argument", argument=action.metavar or key.upper(), command=args.command)
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
        parser = build_parser()
        args = parser.parse_args(argv)
        args.lang = getattr(args, "lang", None) or args.lang_before_command or "en"
        if not getattr(args, "run", None):
            raise CalculatorError("cli_no_command")
        _refuse_empty_values(args, parser)
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
