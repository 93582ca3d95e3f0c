"""The command line's parser: every command of calculator/cli/commands/ (and the extra ones
main.py adds, the MCP server), the shared options, `--markdown` on the answering commands and
`--lang` on all; and the checks of what a parsed namespace holds. The MCP tools read the
commands' options from here without the MCP server itself, so neither imports the other."""

from __future__ import annotations

import argparse

from calculator.cli.commands import COMMANDS
from calculator.cli.commands._common import parents
from calculator.cli.usage import usage_reason
from calculator.core.errors import CalculatorError


class _Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line and use our exit code."""

    def error(self, message: str):  # noqa: D401 - argparse's API
        raise CalculatorError("cli_usage", detail=usage_reason(message), command=self.prog)


def build_parser(extra_commands=()) -> argparse.ArgumentParser:
    """The parser of every command, then of `extra_commands` (modules with `register`)."""
    parser = _Parser(prog="python -m calculator", description="Memory calculator for transformer models.")
    # --lang before the command too, so `python -m calculator --lang fr` alone is answered in French
    parser.add_argument("--lang", dest="lang_before_command", choices=("en", "fr"), default=None,
                        help="the language of error messages (also accepted after the command)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    shared = parents()
    for command in (*COMMANDS, *extra_commands):
        command.register(commands, shared)
    from calculator.answers.markdown import ANSWERING

    for name in ANSWERING:  # the paste-ready answer, on every answering command
        answering = commands.choices[name]
        answering.add_argument("--markdown", action="store_true", help="a short Markdown answer to paste")
    for command in commands.choices.values():  # every command refuses bad input in the reader's language
        command.add_argument("--lang", choices=("en", "fr"), default=None,
                             help="the language of error messages and of the --markdown answer (default en)")
    return parser


def _command_actions(parser: argparse.ArgumentParser, command: str) -> dict[str, argparse.Action]:
    """The arguments of one command, by the name its value is stored under."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its subcommands there only
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return {a.dest: a for a in action.choices[command]._actions}  # noqa: SLF001
    return {}


def refuse_empty_values(args, parser: argparse.ArgumentParser) -> None:
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
