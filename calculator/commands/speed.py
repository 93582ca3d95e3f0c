"""`speed MODEL --gpu G`: memory, latency and throughput per batch size (roofline)."""

from __future__ import annotations

from ..units import format_bytes
from ._common import add_command, find_gpu, print_json, render_table, resolve_model


def register(commands, shared) -> None:
    p = add_command(commands, "speed", shared, ("model", "json"), run,
                    help="memory, latency and throughput per batch size and precision (roofline)")
    p.add_argument("--gpu", required=True, help="GPU key from the GPU catalog (e.g. h100, a100-80gb, rtx4090)")
    p.add_argument("--dtypes", nargs="+", default=["bfloat16"], metavar="D", help="weight precisions")
    p.add_argument("--prompt", type=int, default=1024, help="prompt tokens per sequence (default 1024)")
    p.add_argument("--new-tokens", type=int, default=256, help="tokens generated per sequence (default 256)")
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32], metavar="B", help="batch sizes")


def run(args) -> int:
    from ..inference import check_sizes, inference_memory, largest_batch
    from ..precision import normalize_dtype
    from ..speed import generation

    from .. import limits

    for name, value in (("prompt", args.prompt), ("new_tokens", args.new_tokens)):
        limits.check(name, value)
    card = find_gpu(args.gpu)
    model = resolve_model(args)
    dtypes = [normalize_dtype(d) for d in args.dtypes]
    context = args.prompt + args.new_tokens
    for b in args.batches:
        check_sizes(b, context)
    rows, largest = [], {}
    for dtype in dtypes:
        largest[dtype] = largest_batch(model.summary, model.spec, card.memory_bytes, context, dtype=dtype)
        for b in args.batches:
            memory = inference_memory(model.summary, model.spec, b, context, dtype)
            run = generation(model.summary, model.spec, card, dtype, b, args.prompt, args.new_tokens)
            rows.append({"dtype": dtype, "batch": b, "memory_bytes": memory.total_bytes,
                         "fits": memory.total_bytes <= card.memory_bytes,
                         "time_to_first_token_s": run.time_to_first_token, "time_per_token_s": run.time_per_token,
                         "tokens_per_second": run.tokens_per_second, "decode_bound": run.decode_bound})
    if args.json:
        print_json({"model": model.name, "gpu": card.key, "gpu_memory_bytes": card.memory_bytes,
                    "prompt": args.prompt, "new_tokens": args.new_tokens, "largest_batch": largest, "rows": rows})
        return 0
    print(f"Model: {model.name}   GPU: {card.name} ({format_bytes(card.memory_bytes)})   "
          f"prompt {args.prompt} + {args.new_tokens} new tokens")
    table = [[r["dtype"], str(r["batch"]), format_bytes(r["memory_bytes"]), "yes" if r["fits"] else "no",
              f"{r['time_to_first_token_s'] * 1000:.1f} ms", f"{r['time_per_token_s'] * 1000:.2f} ms",
              f"{r['tokens_per_second']:.0f}", r["decode_bound"]] for r in rows]
    print(render_table(["dtype", "batch", "memory", "fits", "prefill", "per token", "tokens/s", "decode is"], table))
    print("Largest batch that fits: " + ", ".join(f"{d}: {n}" for d, n in largest.items()))
    print("Roofline estimate from datasheet peaks: a best case; real kernels reach 50-80% of it.")
    return 0
