"""What every command shares: the options declared once (argparse parents), the model and
GPU they name, and the output (tables with explicit units, JSON in bytes)."""

from __future__ import annotations

import argparse
import json
import math

from calculator.core.errors import CalculatorError
from calculator.core.units import GB, GIB, format_bytes

MODEL_HELP = "catalog name, path to config.json (or its folder), or Hub id"


def parents() -> dict[str, argparse.ArgumentParser]:
    """Shared options, each declared once: a command lists the ones it takes."""
    model = argparse.ArgumentParser(add_help=False)
    model.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes")
    trust = argparse.ArgumentParser(add_help=False)
    trust.add_argument("--trust-remote-code", action="store_true",
                       help="let transformers run the code of the model's repository (only if you trust it)")
    units = argparse.ArgumentParser(add_help=False)
    units.add_argument("--units", choices=("GiB", "GB"), default="GiB", help="binary (GiB, default) or decimal (GB) units")
    return {"model": model, "json": as_json, "trust": trust, "units": units}


def add_command(commands, name: str, shared: dict, uses: tuple[str, ...], run, **options) -> argparse.ArgumentParser:
    """A subcommand with the shared options it uses; `run(args) -> exit code`."""
    parser = commands.add_parser(name, parents=[shared[u] for u in uses], **options)
    parser.set_defaults(run=run)
    return parser


def resolve_model(args, model_class: str = "auto"):
    """The model a command names (the CLI may read local files and, if asked, run remote code;
    the MCP server sets `args.allow_local` False and never asks)."""
    from calculator.models.seam import resolve

    return resolve(args.model, model_class, allow_local=getattr(args, "allow_local", True),
                   trust_remote_code=getattr(args, "trust_remote_code", False))


def find_gpu(key: str | None):
    """The card an option names; None when the option was left out (an empty name is an
    unknown GPU, not "no GPU")."""
    from calculator.core.gpus import gpu

    return gpu(key) if key is not None else None


def platform_gpus(args, default, option: str = "gpus"):
    """The GPU count a command runs with: its option (--gpus), or the platform's own count when
    the option was left at its default ("Kaggle 2xT4" is two T4s)."""
    from calculator.core.gpus import gpu_count

    given = getattr(args, option)
    count = gpu_count(args.gpu) if getattr(args, "gpu", None) else 1
    return count if given == default and count > 1 else given


def print_card_precision(card, precision) -> None:
    """Say it when the card chose float16 over bfloat16 (verdicts.card_dtype), as the commands
    that start from the card's precision do."""
    from calculator.answers.verdicts import card_chose_float16

    if precision is not None and card_chose_float16(precision.value):
        print(f"Precision: float16, the {card.name} has no bfloat16 tensor cores (--dtype to choose another).")


def sizer(units: str):
    """The size formatter for --units, and the line that names the unit."""
    system = "binary" if units == "GiB" else "decimal"
    note = f"Units: {units} = {'2^30' if system == 'binary' else '10^9'} bytes."
    return (lambda n: format_bytes(n, system=system)), note


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def print_json(data: dict) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


MAX_SIZE_BYTES = 2**60  # an exbibyte: far above any memory, far below what overflows


def parse_size(text: str, name: str) -> int:
    """'20GiB', '64 GB', '512MiB' -> bytes. Not a number, negative, infinite or absurd
    (1e308GiB, 400 digits): refused."""
    value = str(text).strip()
    for suffix, factor in (("GiB", GIB), ("MiB", 2**20), ("GB", GB), ("MB", 10**6), ("B", 1)):
        if value.endswith(suffix):
            number = value[: -len(suffix)].strip()
            if len(number) > 40:
                break
            try:
                size = float(number) * factor
            except ValueError:
                break
            if math.isfinite(size) and 0 <= size <= MAX_SIZE_BYTES:
                return int(size)
            break
    raise CalculatorError("bad_size_text", name=name, value=value[:30])


def budget_for(card):
    from calculator.core.budget import Budget

    return Budget(card) if card is not None else None


VERDICT_WORDS = {"fits": "fits", "tight": "TIGHT (inside the headroom: it may run out of memory)",
                 "too_big": "does NOT fit"}


def readings_lines(readings, card, size=format_bytes) -> list[str]:
    """Human lines: the peak three ways, then the verdict against the card's usable memory."""
    lines = [f"Peak: {size(readings.allocated_bytes)} allocated (torch.cuda.max_memory_allocated), "
             f"{size(readings.reserved_bytes)} reserved (max_memory_reserved), "
             f"{size(readings.nvidia_smi_bytes)} in nvidia-smi (with the CUDA context)."]
    if card is not None:
        lines.append(f"On {card.name}: {VERDICT_WORDS[readings.verdict]}. Usable: {size(readings.usable_bytes)} "
                     f"(PyTorch's total {size(card.total_bytes)} less the CUDA context {size(card.context_bytes)}, "
                     f"read from published out-of-memory messages); headroom kept: {size(readings.headroom_bytes)}, "
                     f"{size(budget_for(card).context_spread_bytes)} of it for the context's spread.")
    return lines


VERDICT_MARKS = {"fits": "yes", "tight": "tight", "too_big": "no"}


def verdict_line(answer, card, size=format_bytes) -> str:
    """One human line: the verdict on the card and the budget it was read against."""
    figures = answer.figures
    return (f"On {card.name}: {VERDICT_WORDS[answer.verdict]}. Usable: {size(figures['usable_bytes'])}, "
            f"headroom kept: {size(figures['headroom_bytes'])}.")
