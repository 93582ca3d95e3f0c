"""`python -m calculator ...` run in the test's own process: what a subprocess would give back
(exit code, stdout, stderr) without starting Python and importing torch again (about 3 s a
command on the 2-core machine). For tests about what a command prints or refuses; the few that
are about the process itself (exit status, no traceback on stderr) keep a real subprocess.

An exception that escapes `main` is not turned into an exit code: it fails the test with its
traceback, as a traceback on a real command's stderr would."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from unittest.mock import patch

from calculator.cli import main as cli

_PARSER = None
_BUILD_PARSER = cli.build_parser


def _parser():
    """The argument parser, built once: building it is most of a short command's time. Parsing
    does not change it (argparse makes a new namespace for every parse)."""
    global _PARSER
    if _PARSER is None:
        _PARSER = _BUILD_PARSER()
    return _PARSER


@contextlib.contextmanager
def _environment(env: dict | None):
    """os.environ as the command would see it (a None value: the variable unset), put back
    afterwards (main() sets a default)."""
    saved = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_cli(*argv: str, stdin: str | bytes = b"", env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the CLI on argv as `python -m calculator *argv` would, with `stdin` as its input and
    `env` changing the environment; returns (args, returncode, stdout, stderr) as text."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    out, err = io.StringIO(), io.StringIO()
    with (_environment(env), patch.object(cli, "build_parser", _parser), patch.object(sys, "stdin", io.TextIOWrapper(io.BytesIO(data))),
          contextlib.redirect_stdout(out), contextlib.redirect_stderr(err)):
        try:
            code = cli.main(list(argv))
        except SystemExit as done:  # --help, --version: argparse exits
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return subprocess.CompletedProcess(["python", "-m", "calculator", *argv], code, out.getvalue(), err.getvalue())
