"""`tensor-parallel MODEL --degree T`: per-GPU weights and all-reduces with tensor parallelism."""

from __future__ import annotations

from calculator.core.precision import DTYPES
from calculator.core.units import format_bytes
from calculator.cli.commands._common import add_command, find_gpu, print_json, render_table, resolve_model, verdict_line


def register(commands, shared) -> None:
    from calculator.distributed.parallel import TP_DEGREES

    p = add_command(commands, "tensor-parallel", shared, ("model", "json"), run,
                    help="per-GPU weights and all-reduces with tensor parallelism")
    p.add_argument("--degree", type=int, required=True, help=f"GPUs sharing each layer ({', '.join(map(str, TP_DEGREES))})")
    p.add_argument("--dtype", default="bfloat16", help=f"weight precision ({', '.join(DTYPES)})")
    p.add_argument("--tokens", type=int, default=2048, help="tokens per forward pass (prompt x batch), default 2048")
    p.add_argument("--gpu", default="h100", help="GPU key: its interconnect and peak throughput (default h100)")


def run(args) -> int:
    from calculator.distributed.parallel import communication_seconds, links_for
    from calculator.core.precision import normalize_dtype
    from calculator.answers.verdicts import tensor_parallel_answer

    dtype = normalize_dtype(args.dtype)
    card = find_gpu(args.gpu)
    model = resolve_model(args)
    answer = tensor_parallel_answer(model, card, dtype, args.degree, args.tokens)
    result = answer.detail
    links = {name: communication_seconds(result, gbs) for name, gbs in links_for(card).items()}
    if args.json:
        from calculator.answers.parallel_json import tensor_parallel_json

        print_json(tensor_parallel_json(model, card, args.tokens, answer))
        return 0
    print(f"Model: {model.name}   {dtype}   degree {result.degree}   per GPU {format_bytes(result.per_gpu_bytes)} "
          f"(of which {format_bytes(result.replicated_bytes)} held whole by every GPU), whole model {format_bytes(result.total_bytes)}")
    print(render_table(["matrix", "in x out", "count", "split", "per GPU"],
                       [[m.name, f"{m.in_features} x {m.out_features}", str(m.count), m.split, format_bytes(m.bytes_per_gpu)]
                        for m in result.matrices]))
    print(f"{result.allreduces_per_forward} all-reduces of {format_bytes(result.allreduce_bytes)} per forward "
          f"({args.tokens} tokens):")
    print(render_table(["link", "time per forward"], [[name, f"{s * 1000:.2f} ms"] for name, s in links.items()]))
    print(verdict_line(answer, card))
    print("Units: GiB = 2^30 bytes. Bandwidth only: small messages add latency.")
    return 0
