"""python -m calculator <command> ... [--json]

Human output is a table with explicit units; --json prints one object with sizes in bytes.
Bad input: exit code 2 and one line saying what is wrong and what to do, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import catalog
from .errors import CalculatorError
from .precision import DEFAULT_DTYPES, DTYPES
from .units import format_bytes, format_count

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line and use our exit code."""

    def error(self, message: str):  # noqa: D401 - argparse's API
        raise CalculatorError("cli_usage", detail=message, command=self.prog)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m calculator", description="Memory calculator for transformer models.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for register in COMMANDS:
        register(commands)
    return parser


def _add_estimate(commands) -> None:
    p = commands.add_parser("estimate", help="memory to load a model, per precision")
    p.add_argument("model", metavar="MODEL", help="catalog name, path to config.json (or its folder), or Hub id")
    p.add_argument("--dtypes", nargs="+", default=list(DEFAULT_DTYPES), metavar="D",
                   help=f"precisions to show ({', '.join(DTYPES)}); default: {' '.join(DEFAULT_DTYPES)}")
    p.add_argument("--model-class", choices=("auto", "base"), default="auto",
                   help="auto: the checkpoint's own class (with its head); base: the bare AutoModel, as accelerate builds it")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="let transformers run the code of the model's repository (only if you trust it)")
    p.add_argument("--units", choices=("GiB", "GB"), default="GiB", help="binary (GiB, default) or decimal (GB) units")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes")
    p.set_defaults(run=_run_estimate)


def _run_estimate(args) -> int:
    from .estimate import estimate

    result = estimate(args.model, args.dtypes, args.model_class, allow_local=True,
                      trust_remote_code=args.trust_remote_code)
    if args.json:
        _print_json(result.to_json())
        return 0
    s = result.summary
    system = "binary" if args.units == "GiB" else "decimal"
    size = lambda n: format_bytes(n, system=system)  # noqa: E731
    print(f"Model:        {result.model} ({result.source})")
    print(f"Architecture: {s.architecture} (model class: {s.model_class})")
    print(f"Parameters:   {format_count(s.parameters)}"
          + (f" ({format_count(s.active_parameters)} active per token)" if s.active_parameters else ""))
    print(f"Buffers:      {size(s.buffers_bytes)} in float32")
    headers = ["dtype", "largest layer", "total", "training with Adam*", "rule of thumb (x1.1)"]
    rows = [[r.dtype, f"{size(r.largest_layer_bytes)} ({r.largest_layer})", size(r.total_bytes),
             size(r.training_adam_bytes) if r.training_adam_bytes is not None else "n/a",
             size(r.rule_of_thumb_bytes)] for r in result.rows]
    print(render_table(headers, rows))
    print(f"Units: {args.units} = {'2^30' if system == 'binary' else '10^9'} bytes. "
          "*As accelerate estimate-memory computes it, for a batch of 1.")
    return 0


def _add_catalog(commands) -> None:
    p = commands.add_parser("catalog", help="the bundled models")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(run=_run_catalog)


def _run_catalog(args) -> int:
    models = []
    for entry in catalog.entries():
        s = catalog.stored_summary(entry.key)
        models.append({"name": entry.key, "id": entry.id, "kind": entry.kind, "attention": entry.attention,
                       "tags": list(entry.tags), "architecture": s.architecture, "parameters": s.parameters,
                       "active_parameters": s.active_parameters})
    if args.json:
        _print_json({"models": models, "versions": catalog.stored_versions()})
        return 0
    rows = [[m["name"], m["id"], m["kind"], m["attention"].upper(), format_count(m["parameters"]),
             ", ".join(m["tags"])] for m in models]
    print(render_table(["name", "Hub id", "kind", "attention", "parameters", "notes"], rows))
    return 0


def _add_refresh(commands) -> None:
    p = commands.add_parser("refresh-catalog", help="recompute the stored catalog counts (maintainers)")
    p.set_defaults(run=lambda args: print(catalog.refresh()) or 0)


# Each command registers itself here; later chapters append theirs.
COMMANDS = [_add_estimate, _add_catalog, _add_refresh]


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _print_json(data: dict) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if not getattr(args, "run", None):
            raise CalculatorError("cli_no_command")
        return args.run(args)
    except CalculatorError as error:
        print(f"error: {error.message('en')}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
