"""`quantize MODEL`: memory of a model in each quantization format, from its real matrices."""

from __future__ import annotations

from ..units import format_bytes, format_count
from ._common import add_command, find_gpu, print_json, render_table, resolve_model


def register(commands, shared) -> None:
    from ..quantization import DEFAULT_GROUP_SIZE, FORMAT_KEYS

    p = add_command(commands, "quantize", shared, ("model", "json"), run,
                    help="memory of a model in each quantization format, from its real matrices")
    p.add_argument("--formats", nargs="+", default=list(FORMAT_KEYS), metavar="F",
                   help=f"formats to show ({', '.join(FORMAT_KEYS)}); default: all")
    p.add_argument("--group-size", type=int, default=DEFAULT_GROUP_SIZE, help="GPTQ/AWQ group size (32, 64 or 128)")
    p.add_argument("--gpu", help="GPU key: say which formats fit on it")


def run(args) -> int:
    from ..quantization import quant_format, quantize_all

    formats = [quant_format(name) for name in args.formats]
    card = find_gpu(args.gpu)
    model = resolve_model(args)
    results = quantize_all(model.summary, model.spec, args.group_size, formats)
    capacity = card.memory_bytes if card else None
    if args.json:
        print_json({"model": model.name, "parameters": model.summary.parameters, "group_size": args.group_size,
                    "gpu": card.key if card else None, "gpu_memory_bytes": capacity,
                    "rows": [{**r.to_json(), **({"fits": r.total_bytes <= capacity} if card else {})} for r in results]})
        return 0
    print(f"Model: {model.name}   parameters: {format_count(model.summary.parameters)}   GPTQ/AWQ group: {args.group_size}"
          + (f"   GPU: {card.name} ({format_bytes(capacity)})" if card else ""))
    headers = ["format", "bits/quantized weight", "quantized", "kept (16/32-bit)", "total", "bits/param"]
    headers += ["fits"] if card else []
    rows = [[r.format, f"{r.bits_per_quantized_weight:.3f}" if r.quantized_parameters else "-",
             format_bytes(r.quantized_bytes), format_bytes(r.kept_bytes + r.buffers_bytes), format_bytes(r.total_bytes),
             f"{r.bits_per_parameter:.3f}"] + (["yes" if r.total_bytes <= capacity else "no"] if card else [])
            for r in results]
    print(render_table(headers, rows))
    print("Units: GiB = 2^30 bytes. Weights only: leave room for the KV cache and activations.")
    return 0
