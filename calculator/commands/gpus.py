"""`gpus [--json]`: the cards the calculator knows, with the totals nvidia-smi and PyTorch report
and the memory one process can use (the total less the CUDA context)."""

from __future__ import annotations

from ._common import add_command, print_json, render_table


def register(commands, shared) -> None:
    add_command(commands, "gpus", shared, ("json",), run, help="the GPU cards (keys for --gpu) and their memory")


def card_json(card) -> dict:
    return {"key": card.key, "name": card.name, "nominal": card.nominal, "architecture": card.architecture,
            "nvidia_smi_total_bytes": card.memory_bytes, "torch_total_bytes": card.total_bytes,
            "context_bytes": card.context_bytes, "usable_bytes": card.usable_bytes,
            "bandwidth_gbs": card.bandwidth_gbs, "bf16_tflops": card.bf16_tflops, "interconnect": card.interconnect}


def run(args) -> int:
    from ..gpus import gpus
    from ..units import format_bytes

    cards = [card_json(card) for card in gpus().values()]
    if args.json:
        print_json({"gpus": cards})
        return 0
    print(render_table(["key", "name", "nvidia-smi total", "PyTorch total", "usable by one process"],
                       [[c["key"], c["name"], format_bytes(c["nvidia_smi_total_bytes"]),
                         format_bytes(c["torch_total_bytes"]), format_bytes(c["usable_bytes"])] for c in cards]))
    print("Units: GiB = 2^30 bytes. Usable: PyTorch's total less the CUDA context.")
    return 0
