"""`offload MODEL [--gpu-memory B] [--cpu-memory C] [--quantization Q]`: transformers' device
map for a GPU budget, the CPU memory (and disk) the rest needs, the cost of offloading, and the
code that loads it."""

from __future__ import annotations

import json

from calculator.core.errors import CalculatorError
from calculator.core.units import format_bytes
from calculator.cli.commands._common import add_command, find_gpu, parse_size, platform_gpus, print_card_precision, print_json, render_table, resolve_model


def register(commands, shared) -> None:
    from calculator.distributed.offload_bnb import QUANTIZATIONS

    p = add_command(commands, "offload", shared, ("model", "json"), run,
                    help="the device map for a GPU budget: CPU memory (and disk) needed, cost, loading code")
    p.add_argument("--gpu-memory", help="budget per GPU, e.g. 20GiB (default: what --gpu gives a process, "
                                        "less the 5%% headroom)")
    p.add_argument("--gpus", type=int, default=1, help="number of GPUs (default 1)")
    p.add_argument("--cpu-memory", help="CPU memory limit, e.g. 64GiB; beyond it, layers go to disk "
                                        "(default: no limit, and the CPU memory needed is printed)")
    p.add_argument("--dtype", default=None, help="float16, bfloat16 or float32 (default: bfloat16, or float16 on a "
                                                 "card without bfloat16 tensor cores, as inference and speed)")
    p.add_argument("--quantization", default="none", choices=QUANTIZATIONS,
                   help="bitsandbytes on the GPU, offloaded layers unquantized (default none)")
    p.add_argument("--gpu", default="rtx4090", help="GPU key: its memory bandwidth and PCIe link (default rtx4090)")


def run(args) -> int:
    from calculator.distributed.offload import MAX_GPUS, compact_map, default_gpu_budget, forward_cost, snippet
    from calculator.distributed.offload_plan import plan_config
    from calculator.core.precision import normalize_dtype

    from calculator.answers.verdicts import card_dtype

    card = find_gpu(args.gpu)
    args.gpus = platform_gpus(args, 1)
    asked, precision = card_dtype(card, args.dtype)  # float16 on a T4, V100 or P100 unless asked
    dtype = normalize_dtype(asked)
    gpu_budget = parse_size(args.gpu_memory, "--gpu-memory") if args.gpu_memory else default_gpu_budget(card)
    cpu_budget = parse_size(args.cpu_memory, "--cpu-memory") if args.cpu_memory else None
    if not 1 <= args.gpus <= MAX_GPUS:
        raise CalculatorError("bad_size", name="number of GPUs", value=args.gpus, high=MAX_GPUS)
    resolved = resolve_model(args)
    if resolved.config is None:
        raise CalculatorError("offload_no_config", model=resolved.name[:80])
    plan, architecture = plan_config(json.dumps(resolved.config, sort_keys=True), [gpu_budget] * args.gpus,
                                     cpu_budget, dtype, args.quantization)
    cost = forward_cost(plan, card)
    if args.json:
        from calculator.answers.offload_json import offload_json

        print_json(offload_json(resolved, card, gpu_budget, args.gpus, plan, cost, precision))
        return 0
    code = snippet(resolved.load_id or resolved.name, architecture, plan)
    quant = "" if plan.quantization == "none" else f" + {plan.quantization} on the GPU"
    print(f"Model: {resolved.load_id or resolved.name}   {dtype}{quant}   "
          f"whole model in this format: {format_bytes(plan.all_on_gpu_bytes)}")
    print(f"GPU budget: {format_bytes(gpu_budget)} x {args.gpus} ({card.name})")
    print_card_precision(card, precision)
    print(render_table(["from", "to", "modules", "device"], [[a, b, str(n), d] for a, b, d, n in compact_map(plan.device_map)]))
    print(f"On GPUs {format_bytes(plan.gpu_bytes)}, CPU {format_bytes(plan.cpu_bytes)}, disk {format_bytes(plan.disk_bytes)}.")
    if cpu_budget is None:
        print(f"CPU memory needed: {format_bytes(plan.cpu_bytes)} for the offloaded weights"
              + (" (kept unquantized)." if plan.quantization != "none" and plan.cpu_bytes else "."))
    print(f"One forward pass: {cost.seconds * 1000:.1f} ms against {cost.all_on_gpu_seconds * 1000:.1f} ms with every "
          f"weight in GPU memory (x{cost.slowdown:.1f}; {cost.link} at {cost.link_gbs:.0f} GB/s).")
    print(code, end="")
    return 0
