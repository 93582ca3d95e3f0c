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
    from ..format_support import support_of
    from ..quantization import quant_format, quantize_all, shipped_format

    formats = [quant_format(name) for name in args.formats]
    card = find_gpu(args.gpu)
    model = resolve_model(args)
    results = quantize_all(model.summary, model.spec, args.group_size, formats)
    capacity = card.memory_bytes if card else None
    shipped = shipped_format(model.config)
    if args.json:
        print_json({"model": model.name, "parameters": model.summary.parameters, "group_size": args.group_size,
                    "shipped": shipped,
                    "gpu": card.key if card else None, "gpu_memory_bytes": capacity,
                    "rows": [{**r.to_json(), **_loaders(support_of(r.format)),
                              **({"fits": r.total_bytes <= capacity} if card else {})} for r in results]})
        return 0
    print(f"Model: {model.name}   parameters: {format_count(model.summary.parameters)}   GPTQ/AWQ group: {args.group_size}"
          + (f"   GPU: {card.name} ({format_bytes(capacity)})" if card else ""))
    headers = ["format", "bits/quantized weight", "quantized", "kept (16/32-bit)", "total", "bits/param",
               "transformers 5", "engines"]
    headers += ["fits"] if card else []
    rows = [[r.format, f"{r.bits_per_quantized_weight:.3f}" if r.quantized_parameters else "-",
             format_bytes(r.quantized_bytes), format_bytes(r.kept_bytes + r.buffers_bytes), format_bytes(r.total_bytes),
             f"{r.bits_per_parameter:.3f}", _transformers_cell(support_of(r.format)),
             ", ".join(support_of(r.format).engines) or "-"]
            + (["yes" if r.total_bytes <= capacity else "no"] if card else [])
            for r in results]
    print(render_table(headers, rows))
    if shipped:
        print(f"The checkpoint ships in {shipped}.")
    print("Units: GiB = 2^30 bytes. Weights only: leave room for the KV cache and activations. transformers 5: "
          "the config class that loads the format; cc8.9 / gpt-oss, cc7.5: kept as stored from that compute "
          "capability, dequantized to bfloat16 below; on load only: quantizes a 16-bit checkpoint, cannot load a "
          "stored one.")
    return 0


# What `native` means for the transformers column (calculator/format_support.py).
_CONDITIONS = {"always": "", "cc89": " (cc8.9)", "gpt_oss_cc75": " (gpt-oss, cc7.5)",
               "never_prequantized": " (on load only)", "gguf_kernel": " (where it has a kernel)"}


def _transformers_cell(support) -> str:
    return (support.transformers + _CONDITIONS[support.native]) if support.transformers else "yes"


def _loaders(support) -> dict:
    return {"transformers": support.transformers or None, "transformers_native": support.native,
            "engines": list(support.engines)}
