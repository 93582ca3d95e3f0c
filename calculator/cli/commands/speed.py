"""`speed MODEL --gpu G`: memory, latency and throughput per batch size (roofline), for the
model's workload: tokens per second for generation, sequences per second for a forward pass
(`--mode forward --sequence S`), audio hours per hour for speech; `--measured` compares a
speed the reader measured with the ceiling."""

from __future__ import annotations

from calculator.core.units import format_bytes
from calculator.cli.commands._common import VERDICT_MARKS, add_command, find_gpu, print_json, render_table, resolve_model


def register(commands, shared) -> None:
    from calculator.memory.workloads import WORKLOADS

    p = add_command(commands, "speed", shared, ("model", "json"), run,
                    help="memory, latency and throughput per batch size and precision (roofline)")
    p.add_argument("--gpu", required=True, help="GPU key from the GPU catalog (e.g. h100, a100-80gb, rtx4090)")
    p.add_argument("--dtypes", nargs="+", default=None, metavar="D",
                   help="weight precisions (default: bfloat16, or float16 on a card without bfloat16 tensor cores)")
    p.add_argument("--prompt", type=int, default=1024, help="prompt tokens per sequence (default 1024)")
    p.add_argument("--new-tokens", type=int, default=256, help="tokens generated per sequence (default 256)")
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32], metavar="B", help="batch sizes")
    p.add_argument("--workload", choices=WORKLOADS, default=None,
                   help="generation, forward, seq2seq, speech or vision (default: the model's own)")
    p.add_argument("--mode", choices=("generate", "forward"), default=None,
                   help="forward: one pass over --sequence tokens, in sequences per second (= --workload forward)")
    p.add_argument("--sequence", type=int, default=None,
                   help="tokens per sequence of a forward pass (default: --prompt, as the slow-model chapter reads its case)")
    p.add_argument("--encoder", type=int, default=None, help="seq2seq: the encoder's input tokens (default: --prompt)")
    p.add_argument("--measured", type=float, default=None,
                   help="the speed you measured, in the workload's unit (tokens/s for generation, items/s "
                        "otherwise), at the first batch size and precision: the fraction of the ceiling it reaches")


def _workload(args, spec) -> str:
    from calculator.core.errors import CalculatorError
    from calculator.memory.workloads import check_workload, default_workload

    asked = args.workload or ("forward" if args.mode == "forward" else None)
    if args.mode == "generate" and not args.workload:
        asked = "generation"
    if args.mode and args.workload and asked != ("forward" if args.mode == "forward" else args.workload):
        raise CalculatorError("unknown_choice", name="mode", value=args.mode, choices=args.workload)
    return check_workload(spec, asked) if asked else default_workload(spec)


def _dtypes(asked, card):
    """The precisions asked for; none asked: the one the card computes in (float16 where
    bfloat16 has no tensor cores, as data-parallel and the chapter choose), said as an assumption."""
    from calculator.answers.verdicts import card_dtype
    from calculator.core.precision import normalize_dtype

    if asked:
        return [normalize_dtype(d) for d in asked], None
    dtype, precision = card_dtype(card, None)
    return [dtype], precision


def run(args) -> int:
    from calculator.core import limits
    from calculator.core.budget import Budget
    from calculator.core.errors import CalculatorError
    from calculator.memory.inference import check_sizes
    from calculator.memory.workload_speed import against_ceiling, check_measured, workload_speed
    from calculator.memory.workloads import shape

    for name, value in (("prompt", args.prompt), ("new_tokens", args.new_tokens), ("sequence", args.sequence or 1),
                        ("encoder", args.encoder or 1)):
        limits.check(name, value)
    card = find_gpu(args.gpu)
    model = resolve_model(args)
    workload = _workload(args, model.spec)
    if args.encoder is not None and workload not in ("seq2seq", "speech"):
        raise CalculatorError("encoder_needs_encoder_decoder", model_type=model.spec.model_type or model.spec.kind)
    sequence = args.prompt if args.sequence is None else args.sequence  # the page reads the case's prompt
    work = shape(model.spec, workload, prompt=args.prompt, new_tokens=args.new_tokens, sequence=sequence,
                 encoder=args.encoder)
    if args.measured is not None:
        check_measured(args.measured, "tokens_per_second" if workload == "generation" else "items_per_second")
    dtypes, precision = _dtypes(args.dtypes, card)
    for b in args.batches:
        check_sizes(b, work.prompt + work.new_tokens)
    from calculator.answers.parallel_json import speed_json

    result = speed_json(model, card, dtypes, work, args.batches, precision)
    rows, largest, budget = result["rows"], result["largest_batch"], Budget(card)
    if args.measured is not None:
        first = workload_speed(model.summary, model.spec, card, dtypes[0], args.batches[0], work)
        result["measured"] = {"dtype": dtypes[0], "batch": args.batches[0], "unit": first.unit,
                              **against_ceiling(args.measured, first).to_json()}
    if args.json:
        print_json(result)
        return 0
    _print(model, card, budget, work, rows, largest, result.get("measured"))
    return 0


def _print(model, card, budget, work, rows, largest, measured) -> None:
    if work.generates:
        lengths = f"prompt {work.prompt} + {work.new_tokens} new tokens"
        if work.encoder_tokens:
            lengths = f"{work.encoder_tokens} encoder tokens, decoder {lengths}"
    else:
        lengths = f"{work.prompt} tokens per item, one forward"
    print(f"Model: {model.name}   GPU: {card.name} (usable {format_bytes(budget.usable_bytes)})   {work.workload}: {lengths}")
    if not work.generates:
        table = [[r["dtype"], str(r["batch"]), format_bytes(r["memory_bytes"]), VERDICT_MARKS[r["verdict"]],
                  f"{r['forward_s'] * 1000:.2f} ms", f"{r['sequences_per_second']:.0f}", r["bound"]] for r in rows]
        print(render_table(["dtype", "batch", "memory", "fits", "forward", "items/s", "bound"], table))
    else:
        speech = work.workload == "speech"
        table = [[r["dtype"], str(r["batch"]), format_bytes(r["memory_bytes"]), VERDICT_MARKS[r["verdict"]],
                  f"{r['time_to_first_token_s'] * 1000:.1f} ms", f"{r['time_per_token_s'] * 1000:.2f} ms",
                  f"{r['tokens_per_second']:.0f}", f"{r['items_per_second']:.2f}"]
                 + ([f"{r['audio_hours_per_hour']:.0f}"] if speech else []) + [r["decode_bound"]] for r in rows]
        headers = ["dtype", "batch", "memory", "fits", "prefill", "per token", "tokens/s", "items/s"]
        print(render_table(headers + (["audio h/h"] if speech else []) + ["decode is"], table))
    print("Largest batch that fits: " + ", ".join(f"{d}: {n}" for d, n in largest.items()))
    if measured:
        print(f"Measured {measured['measured']:g} {measured['unit'].replace('_', ' ')} at {measured['dtype']}, batch "
              f"{measured['batch']}: {measured['fraction']:.0%} of the ceiling ({measured['ceiling']:.4g}); "
              f"read next: {measured['next_section']}.")
    print("Roofline estimate from datasheet peaks: a best case; real kernels reach 50-80% of it.")
