"""`read [FILE] [--kind K] [--model M --gpu G ...] [--json | --markdown] [--lang en|fr]`: read what
a program printed (a vLLM or SGLang start-up log, nvidia-smi, accelerate estimate-memory,
torch.cuda.memory_summary(), a CUDA out-of-memory message) from a file or stdin, set it beside a
case, and say what to do, in the reader's language. JSON: {kind, figures, causes?, comparison:
{findings, advice}} with sizes in bytes; --markdown: the answer to paste, with the section's
link and the command that reads it again."""

from __future__ import annotations

import sys

from calculator.cli.commands._common import add_command, find_gpu, print_json, render_table


def register(commands, shared) -> None:
    from calculator.answers.evidence import KINDS, MAX_BYTES

    p = add_command(commands, "read", shared, ("json", "trust"), run,
                    help="read a pasted log or table (vLLM, SGLang, nvidia-smi, accelerate, memory_summary, OOM)")
    p.add_argument("file", nargs="?", default="-", metavar="FILE",
                   help=f"the text to read (default: stdin; at most {MAX_BYTES // 1024} KiB)")
    p.add_argument("--kind", choices=KINDS, default=None, help="what the text is (default: recognised)")
    p.add_argument("--model", default=None, help="the case's model: catalog name, config.json or Hub id")
    p.add_argument("--gpu", default=None, help="the case's GPU key (see `gpus`)")
    p.add_argument("--dtype", default="bfloat16", help="the case's weights (serving logs): default bfloat16")
    p.add_argument("--context", type=int, default=None,
                   help="tokens per request, when the log does not state max_model_len")
    p.add_argument("--tensor", type=int, default=None, help="tensor-parallel size, when the log does not state it")
    p.add_argument("--markdown", dest="read_markdown", action="store_true",
                   help="the reading as a short Markdown answer to paste (in --lang)")
    p.add_argument("--engine-version", default=None,
                   help="the engine accounting the log was written by: vLLM 0.19 (CUDA graphs outside the "
                        "share) or SGLang 0.4.6 for an older log; default: the engine's current accounting")


def read_input(path: str) -> str:
    """The file's or stdin's text, never more than the cap (one byte more tells it is too long)."""
    from calculator.core.errors import CalculatorError
    from calculator.answers.evidence import MAX_BYTES, decode
    from calculator.core.reasons import os_reason, shown_path

    if path == "-":
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
    else:
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_BYTES + 1)
        except (OSError, ValueError) as error:
            raise CalculatorError("evidence_file", path=shown_path(path), detail=os_reason(error)) from None
    return decode(data)


def answer(args):
    """The evidence read, and its comparison with the case the options give."""
    from calculator.answers.evidence import read
    from calculator.answers.evidence_compare import Case, compare
    from calculator.cli.commands._common import resolve_model

    text = getattr(args, "text", None)  # the MCP tool passes the text itself, never a path
    evidence = read(read_input(args.file) if text is None else text, args.kind)
    model = resolve_model(args) if args.model else None
    case = Case(model=model, card=find_gpu(args.gpu), dtype=args.dtype, context=args.context, tensor=args.tensor,
                engine_version=args.engine_version)
    return evidence, compare(evidence, case)


def run(args) -> int:
    from calculator.answers.answer import section_link
    from calculator.answers.evidence_text import (READ_CASE, answer_markdown, figure_rows, kind_name, lines,
                                                  read_command, section_of)
    from calculator.core.messages import text

    lang = getattr(args, "lang", None) or "en"
    evidence, comparison = answer(args)
    if args.json:
        print_json({**evidence.to_json(), "comparison": comparison.to_json()})
        return 0
    if getattr(args, "read_markdown", False):
        case = tuple((name, str(getattr(args, name))) for name in ("model", "gpu", "dtype", "context", "tensor")
                     if getattr(args, name, None) is not None)
        link = section_link(*section_of(evidence.kind), case, lang)
        command = read_command("pasted.txt" if args.file == "-" else args.file,  # stdin: the text saved
                               {name: getattr(args, name, None) for name, _ in READ_CASE}, args.kind)
        print(answer_markdown(evidence, comparison, lang, link, command), end="")
        return 0
    print(text("evidence.cli_read_as", lang, kind=kind_name(evidence.kind, lang)))
    rows = figure_rows(evidence, lang)
    if rows:
        print(render_table([text("evidence.cli_figure", lang), text("evidence.cli_value", lang)],
                           [list(r) for r in rows]))
    found, advice = lines(evidence, comparison, lang)
    for line in found:
        print(f"- {line}")
    if advice:
        print(text("evidence.cli_what_to_do", lang))
        for line in advice:
            print(f"- {line}")
    print(text("evidence.cli_units", lang))
    return 0
