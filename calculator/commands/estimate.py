"""`estimate MODEL`: memory to load a model, per precision, next to accelerate's figures."""

from __future__ import annotations

from ..precision import DEFAULT_DTYPES, DTYPES
from ..units import format_count
from ._common import add_command, print_json, render_table, resolve_model, sizer


def register(commands, shared) -> None:
    p = add_command(commands, "estimate", shared, ("model", "trust", "units", "json"), run,
                    help="memory to load a model, per precision")
    p.add_argument("--dtypes", nargs="+", default=list(DEFAULT_DTYPES), metavar="D",
                   help=f"precisions to show ({', '.join(DTYPES)}); default: {' '.join(DEFAULT_DTYPES)}")
    p.add_argument("--model-class", choices=("auto", "base"), default="auto",
                   help="auto: the checkpoint's own class (with its head); base: the bare AutoModel, as accelerate builds it")


def run(args) -> int:
    from ..estimate import estimate_model

    result = estimate_model(resolve_model(args, args.model_class), args.dtypes)
    if args.json:
        print_json(result.to_json())
        return 0
    s = result.summary
    size, units = sizer(args.units)
    print(f"Model:        {result.model} ({result.source})")
    print(f"Architecture: {s.architecture} (model class: {s.model_class})")
    print(f"Parameters:   {format_count(s.parameters)}"
          + (f" ({format_count(s.active_parameters)} active per token)" if s.active_parameters else ""))
    print(f"Buffers:      {size(s.buffers_bytes)} in float32")
    headers = ["dtype", "largest layer", "total", "training with Adam*", "rule of thumb (x1.1)"]
    rows = [[r.dtype, f"{size(r.largest_layer_bytes)} ({r.largest_layer})", size(r.total_bytes),
             size(r.training_adam_bytes) if r.training_adam_bytes is not None else "n/a",
             size(r.rule_of_thumb_bytes)] for r in result.rows]
    print(render_table(headers, rows))
    print(f"{units} *As accelerate estimate-memory computes it, for a batch of 1.")
    return 0
