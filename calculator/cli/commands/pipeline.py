"""`pipeline MODEL --gpus K`: a model's layers split over K GPUs, and the pipeline bubble."""

from __future__ import annotations

from calculator.core.precision import DTYPES
from calculator.core.units import format_bytes
from calculator.cli.commands._common import VERDICT_MARKS, add_command, find_gpu, print_json, render_table, resolve_model, verdict_line


def register(commands, shared) -> None:
    p = add_command(commands, "pipeline", shared, ("model", "json"), run,
                    help="split a model's layers over k GPUs (pipeline parallelism) and the bubble")
    p.add_argument("--gpus", type=int, required=True, help="number of GPUs (pipeline stages)")
    p.add_argument("--dtype", default="bfloat16", help=f"weight precision ({', '.join(DTYPES)})")
    p.add_argument("--micro-batches", type=int, default=None, help="micro-batches per batch: prints the bubble")
    p.add_argument("--gpu", help="GPU key: say whether each stage fits")


def run(args) -> int:
    from calculator.distributed.parallel import bubble_fraction, tied_head_copy_bytes
    from calculator.core.precision import normalize_dtype
    from calculator.answers.verdicts import pipeline_answer

    dtype = normalize_dtype(args.dtype)
    card = find_gpu(args.gpu)
    bubble = bubble_fraction(args.gpus, args.micro_batches) if args.micro_batches is not None else None
    model = resolve_model(args)
    answer = pipeline_answer(model, card, dtype, args.gpus)
    stages = answer.detail
    total = model.summary.total_bytes_at(dtype)
    copy = tied_head_copy_bytes(model.summary, model.spec, dtype)
    if args.json:
        from calculator.answers.parallel_json import pipeline_json

        print_json(pipeline_json(model, card, dtype, args.gpus, answer, args.micro_batches))
        return 0
    print(f"Model: {model.name}   {dtype}   total {format_bytes(total)} over {args.gpus} GPU(s)")
    marks = answer.figures.get("per_gpu_verdicts") or [None] * len(stages)
    rows = [[str(s.gpu), s.first, s.last, str(s.units), format_bytes(s.bytes)] + ([VERDICT_MARKS[m]] if card else [])
            for s, m in zip(stages, marks)]
    print(render_table(["GPU", "from", "to", "layers", "memory"] + (["fits"] if card else []), rows))
    if card:
        print(verdict_line(answer, card))
    if copy and args.gpus > 1:
        print(f"The output head shares the embeddings: a stage running it away from them needs a copy ({format_bytes(copy)}).")
    if bubble is not None:
        print(f"Pipeline bubble with {args.micro_batches} micro-batches: {100 * bubble:.1f}% idle, (p - 1) / (m + p - 1).")
    print("Units: GiB = 2^30 bytes. Weights only.")
    return 0
