"""`zero-offload MODEL --gpu G [--tokens N]`: mixed-precision Adam training with and without
ZeRO-Offload (the paper's data flow): the model states on the GPU and in CPU memory, and
whether a step's PCIe transfers hide behind its GPU work (cpu-offloading#zero-offload)."""

from __future__ import annotations

from calculator.core.units import format_bytes
from calculator.cli.commands._common import VERDICT_MARKS, add_command, find_gpu, print_json, render_table, resolve_model


def register(commands, shared) -> None:
    p = add_command(commands, "zero-offload", shared, ("model", "json"), run,
                    help="ZeRO-Offload: model states on the GPU and in CPU memory, transfers against GPU work")
    p.add_argument("--gpu", required=True, help="GPU key: its memory, 16-bit peak and host link (e.g. rtx4090)")
    p.add_argument("--tokens", type=int, default=16384, help="tokens per training step, batch x length (default 16384)")


def run(args) -> int:
    from calculator.answers.offload_multi import zero_offload_json

    card = find_gpu(args.gpu)
    data = zero_offload_json(resolve_model(args), card, args.tokens)
    if args.json:
        print_json(data)
        return 0
    print(f"Model: {data['model']}   GPU: {card.name} (usable {format_bytes(data['usable_bytes'])})   "
          f"{data['parameters']:,} trained parameters, Adam in mixed precision")
    rows = [["everything on the GPU", format_bytes(data["gpu_plain_bytes"]), format_bytes(0),
             VERDICT_MARKS[data["plain_verdict"]]],
            ["ZeRO-Offload", format_bytes(data["gpu_offload_bytes"]), format_bytes(data["cpu_offload_bytes"]),
             VERDICT_MARKS[data["verdict"]]]]
    print(render_table(["setup", "GPU (model states)", "CPU", "fits"], rows))
    print(f"A step of {data['tokens']:,} tokens: {data['transfer_seconds']:.2f} s of transfers over {data['link']} "
          f"against {data['compute_seconds']:.2f} s of GPU work; the transfers hide from about "
          f"{data['threshold_tokens']:,} tokens per step.")
    return 0
