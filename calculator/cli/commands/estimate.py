"""`estimate MODEL`: memory to load a model, per precision, next to accelerate's figures."""

from __future__ import annotations

import shlex

from calculator.core.gpus import gpu_count
from calculator.core.precision import DEFAULT_DTYPES, DTYPES
from calculator.core.units import format_count
from calculator.cli.commands._common import add_command, budget_for, find_gpu, print_json, render_table, resolve_model, sizer


def register(commands, shared) -> None:
    p = add_command(commands, "estimate", shared, ("model", "trust", "units", "json"), run,
                    help="memory to load a model, per precision")
    p.add_argument("--dtypes", nargs="+", default=list(DEFAULT_DTYPES), metavar="D",
                   help=f"precisions to show: {', '.join(DTYPES)}, or a quantization format (mxfp4, nvfp4, "
                        f"fp8-block128, torchao-int4, bnb-nf4, gptq-4bit, Q4_K...: see quantize); default: "
                        f"{' '.join(DEFAULT_DTYPES)}")
    p.add_argument("--model-class", choices=("auto", "base"), default="auto",
                   help="auto: the checkpoint's own class (with its head); base: the bare AutoModel, as accelerate builds it")
    p.add_argument("--gpu", default=None, help="GPU key: adds the usable memory and whether each precision loads on it")


def run(args) -> int:
    from calculator.memory.estimate import estimate_model, fit_verdict, load_readings, weight_rounding

    card = find_gpu(args.gpu)
    budget = budget_for(card)
    model = resolve_model(args, args.model_class)
    if args.json:  # the pages build the same JSON (answers_estimate)
        from calculator.answers.estimate_json import estimate_json

        print_json(estimate_json(model, args.dtypes, card))
        return 0
    result = estimate_model(model, args.dtypes)
    readings = [load_readings(result.summary, row.dtype, budget, model.spec) for row in result.rows]
    verdicts = [fit_verdict(row.total_bytes, row.rule_of_thumb_bytes, budget, weight_rounding(result.summary, row.dtype, model.spec))
                if budget else None for row in result.rows]
    s = result.summary
    size, units = sizer(args.units)
    print(f"Model:        {result.model} ({result.source})")
    print(f"Architecture: {s.architecture} (model class: {s.model_class})")
    print(f"Parameters:   {format_count(s.parameters)}"
          + (f" ({format_count(s.active_parameters)} active per token)" if s.active_parameters else ""))
    print(f"Buffers:      {size(s.buffers_bytes)} in float32")
    headers = ["dtype", "largest layer", "total", "reserved", "nvidia-smi", "training with Adam*", "rule of thumb (x1.1)"]
    headers += [f"on {card.name}"] if card else []
    rows = [[r.dtype, f"{size(r.largest_layer_bytes)} ({r.largest_layer})", size(r.total_bytes),
             size(reading.reserved_bytes), size(reading.nvidia_smi_bytes),
             size(r.training_adam_bytes) if r.training_adam_bytes is not None else "n/a",
             size(r.rule_of_thumb_bytes)] + ([verdict] if card else [])
            for r, reading, verdict in zip(result.rows, readings, verdicts)]
    print(render_table(headers, rows))
    if result.shipped:
        print(f"As shipped: {size(result.shipped.total_bytes)} ({result.shipped.format} for "
              f"{format_count(result.shipped.quantized_parameters)} parameters, the others in 16 bits; "
              f"python -m calculator quantize prices every format).")
    if card:
        print(f"{card.name}: usable {size(budget.usable_bytes)} (PyTorch's total {size(card.total_bytes)} less the "
              f"CUDA context {size(card.context_bytes)}), headroom kept {size(budget.headroom_bytes)}. fits: the "
              "x1.1 rule fits with the headroom; tight: only the bare weights fit.")
        cards = gpu_count(args.gpu)
        if cards > 1:  # a platform's name ("Kaggle 2xT4"): the verdicts are one card's
            print(f"{args.gpu.strip()} is {cards} x {card.name}: the verdicts above are one card's; `python -m calculator "
                  f"offload {shlex.quote(args.model)} --gpu {card.key} --gpus {cards}` places the model across them.")
    print(f"{units} *As accelerate estimate-memory computes it, for a batch of 1. Reserved: as "
          "torch.cuda.memory_reserved() would show the loaded weights; nvidia-smi adds the CUDA context.")
    return 0
