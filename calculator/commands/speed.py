"""`speed MODEL --gpu G`: memory, latency and throughput per batch size (roofline)."""

from __future__ import annotations

from ..units import format_bytes
from ._common import VERDICT_MARKS, add_command, find_gpu, print_json, render_table, resolve_model


def register(commands, shared) -> None:
    p = add_command(commands, "speed", shared, ("model", "json"), run,
                    help="memory, latency and throughput per batch size and precision (roofline)")
    p.add_argument("--gpu", required=True, help="GPU key from the GPU catalog (e.g. h100, a100-80gb, rtx4090)")
    p.add_argument("--dtypes", nargs="+", default=["bfloat16"], metavar="D", help="weight precisions")
    p.add_argument("--prompt", type=int, default=1024, help="prompt tokens per sequence (default 1024)")
    p.add_argument("--new-tokens", type=int, default=256, help="tokens generated per sequence (default 256)")
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32], metavar="B", help="batch sizes")


def run(args) -> int:
    from ..budget import Budget
    from ..errors import CalculatorError
    from ..inference import MAX_TOKENS, check_sizes
    from ..precision import normalize_dtype
    from ..verdicts import speed_answer

    for name, value in (("prompt", args.prompt), ("number of new tokens", args.new_tokens)):
        if not 1 <= value <= MAX_TOKENS:
            raise CalculatorError("bad_size", name=name, value=str(value)[:30], high=MAX_TOKENS)
    card = find_gpu(args.gpu)
    model = resolve_model(args)
    dtypes = [normalize_dtype(d) for d in args.dtypes]
    for b in args.batches:
        check_sizes(b, args.prompt + args.new_tokens)
    answers = {dtype: speed_answer(model, card, dtype, args.prompt, args.new_tokens, args.batches) for dtype in dtypes}
    rows = [{**row, "fits": row["verdict"] == "fits"} for answer in answers.values() for row in answer.figures["rows"]]
    largest = {dtype: answer.figures["largest_batch"] for dtype, answer in answers.items()}
    budget = Budget(card)
    if args.json:
        print_json({"model": model.name, "gpu": card.key, "gpu_memory_bytes": card.memory_bytes,
                    "usable_bytes": budget.usable_bytes, "headroom_bytes": budget.headroom_bytes, "dtypes": dtypes,
                    "prompt": args.prompt, "new_tokens": args.new_tokens, "largest_batch": largest, "rows": rows,
                    "assumptions": [a.to_json() for a in next(iter(answers.values())).assumptions]})
        return 0
    print(f"Model: {model.name}   GPU: {card.name} (usable {format_bytes(budget.usable_bytes)})   "
          f"prompt {args.prompt} + {args.new_tokens} new tokens")
    table = [[r["dtype"], str(r["batch"]), format_bytes(r["memory_bytes"]), VERDICT_MARKS[r["verdict"]],
              f"{r['time_to_first_token_s'] * 1000:.1f} ms", f"{r['time_per_token_s'] * 1000:.2f} ms",
              f"{r['tokens_per_second']:.0f}", r["decode_bound"]] for r in rows]
    print(render_table(["dtype", "batch", "memory", "fits", "prefill", "per token", "tokens/s", "decode is"], table))
    print("Largest batch that fits: " + ", ".join(f"{d}: {n}" for d, n in largest.items()))
    print("Roofline estimate from datasheet peaks: a best case; real kernels reach 50-80% of it.")
    return 0
