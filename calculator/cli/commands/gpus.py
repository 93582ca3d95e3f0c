"""`gpus [--group G] [--json]`: the GPU catalog, each card as a PyTorch process sees it (the
total it is told, the CUDA context, what is left), grouped as the guide's pickers group them."""

from __future__ import annotations

from calculator.core.gpus import GROUPS, gpus
from calculator.cli.commands._common import add_command, print_json, render_table, sizer


def register(commands, shared) -> None:
    p = add_command(commands, "gpus", shared, ("json", "units"), run,
                    help="the GPU catalog: memory, PyTorch's total, usable memory, bandwidth, source")
    p.add_argument("--group", choices=GROUPS[:-1], default=None, help="only this group of cards")


def card_json(card) -> dict:
    """One card, sizes in bytes (a custom card answers the same keys)."""
    return {"key": card.key, "name": card.name, "group": card.group, "architecture": card.architecture,
            "memory_bytes": card.memory_bytes, "torch_total_bytes": card.total_bytes,
            "context_bytes": card.context_bytes, "usable_bytes": card.usable_bytes,
            "bandwidth_gbs": card.bandwidth_gbs, "total_basis": card.total_basis,
            "total_source": card.total_source, "source": card.source}


def run(args) -> int:
    cards = [c for c in gpus().values() if args.group in (None, c.group)]
    if args.json:
        print_json({"gpus": [card_json(c) for c in cards]})
        return 0
    size, note = sizer(args.units)
    rows = [[c.key, c.name, c.group, size(c.memory_bytes), size(c.total_bytes), size(c.usable_bytes),
             f"{c.bandwidth_gbs:g} GB/s", c.total_basis] for c in cards]
    print(render_table(["key", "name", "group", "memory (nvidia-smi)", "PyTorch total", "usable", "bandwidth",
                        "total from"], rows))
    print(note + " Usable: PyTorch's total less the CUDA context. Any other card: --gpu 12GiB or "
                 "--gpu custom:12GiB:360GB/s (memory as nvidia-smi shows it, optional bandwidth).")
    return 0
