"""`oom-message`: read a CUDA out-of-memory message from stdin: its figures, the causes they
prove and, with a case (--model, --dtype, --batch, --tokens), what the allocated figure is made
of and which of the case's tensors is the size of the failed request."""

from __future__ import annotations

import re
import sys

from calculator.core.errors import CalculatorError
from calculator.core.messages import text
from calculator.core.units import format_bytes
from calculator.cli.commands._common import add_command, print_json, render_table

READ_LIMIT = 256 * 1024  # bytes of stdin kept: the message ends the text, the rest is dropped as it streams


def register(commands, shared) -> None:
    p = add_command(commands, "oom-message", shared, ("json",), run,
                    help="read a CUDA out-of-memory message on stdin: figures and causes")
    p.add_argument("--model", help="a case to read the message against: catalog name, config.json or Hub id")
    p.add_argument("--dtype", default="bfloat16", help="the case's precision (default bfloat16)")
    p.add_argument("--batch", type=int, default=1, help="the case's batch (default 1)")
    p.add_argument("--tokens", type=int, default=2048, help="the case's tokens per sequence (default 2048)")


def read_stdin(stream=None, limit: int = READ_LIMIT) -> str:
    """The tail of stdin, at most `limit` bytes held at any time."""
    stream = stream if stream is not None else sys.stdin.buffer
    tail = b""
    while chunk := stream.read(65536):
        tail = (tail + chunk)[-limit:]
    return tail.decode("utf-8", errors="replace")


def run(args) -> int:
    from calculator.memory.oom_message import figures_json, read

    reading = read(read_stdin())
    if reading.report is None:
        raise CalculatorError("oom_no_figures" if reading.mentions_oom else "oom_not_recognised")
    case = _case_reading(args, reading.report)
    if args.json:
        print_json({"figures": figures_json(reading.report), "causes": list(reading.cause_ids),
                    "cause_params": [{"cause": c.code, "variant": c.variant, **{f"{k}_bytes": v for k, v in c.params.items()}}
                                     for c in reading.causes],
                    "case": case.to_json() if case else None})
        return 0
    _print(reading, case, getattr(args, "lang", None) or "en")
    return 0


def _case_reading(args, report):
    if args.model is None:
        return None
    from calculator.models.seam import resolve
    from calculator.memory.oom_case import read_against_case

    model = resolve(args.model, allow_local=True)
    return read_against_case(report, model.summary, model.spec, args.batch, args.tokens, args.dtype)


def plain(message: str) -> str:
    """A UI sentence for a terminal: no bold, no backticks, links as their words."""
    message = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", message)
    return message.replace("**", "").replace("`", "")


def _print(reading, case, lang: str = "en") -> None:
    """The message's figures, the causes they prove and, with a case, what the allocated figure
    is made of: in the reader's language (the oom chapter's own words, oom_message.*)."""
    r = reading.report
    size = lambda value: format_bytes(value, lang)  # noqa: E731
    say = lambda key, **params: plain(text(f"oom_message.{key}", lang, **params))  # noqa: E731
    rows = [[say("requested"), size(r.requested)], [say("total"), size(r.total)],
            [say("free"), size(r.free) if r.free is not None else "-"],
            [say("allocated"), size(r.allocated)], [say("unallocated"), size(r.reserved_unallocated)]]
    optional = [("outside", r.outside_pytorch), ("this_process", r.own_process),
                ("this_process_outside", r.this_process_outside_pytorch), ("others", r.other_processes),
                ("pools", r.private_pools or None)]
    rows += [[say(key), size(value)] for key, value in optional if value is not None]
    style = say("style_current" if r.style == "current" else "style_legacy")
    print(say("read_as", device=r.device, style=style))
    print(render_table([say("col_what"), say("col_size")], rows))
    print(say("cli_units"))
    print(say("cli_causes", codes=", ".join(reading.cause_ids)))
    for cause in reading.causes:
        print("- " + say(f"cause_{cause.key}", **{k: size(v) for k, v in cause.params.items()}))
    if case is not None:
        from calculator.memory.oom_case import case_lines

        for line in case_lines(case, lang):
            print(plain(line))
