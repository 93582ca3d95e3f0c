"""`offload MODEL --gpu-memory B --cpu-memory C`: accelerate's device map for those budgets,
and the cost of offloading."""

from __future__ import annotations

from ..errors import CalculatorError
from ..units import format_bytes
from ._common import add_command, find_gpu, parse_size, print_json, render_table, resolve_model


def register(commands, shared) -> None:
    p = add_command(commands, "offload", shared, ("model", "json"), run,
                    help="accelerate's device map for GPU/CPU budgets, and the cost of offloading")
    p.add_argument("--gpu-memory", required=True, help="budget per GPU, e.g. 20GiB")
    p.add_argument("--gpus", type=int, default=1, help="number of GPUs (default 1)")
    p.add_argument("--cpu-memory", required=True, help="CPU memory budget, e.g. 64GiB")
    p.add_argument("--dtype", default="bfloat16", help="float16, bfloat16 or float32")
    p.add_argument("--gpu", default="rtx4090", help="GPU key: its memory bandwidth and PCIe link (default rtx4090)")


def run(args) -> int:
    from ..offload import MAX_GPUS, build_meta_model, compact_map, forward_cost, plan_device_map, snippet
    from ..precision import normalize_dtype

    card = find_gpu(args.gpu)
    dtype = normalize_dtype(args.dtype)
    gpu_budget = parse_size(args.gpu_memory, "--gpu-memory")
    cpu_budget = parse_size(args.cpu_memory, "--cpu-memory")
    if not 1 <= args.gpus <= MAX_GPUS:
        raise CalculatorError("bad_size", name="number of GPUs", value=args.gpus, high=MAX_GPUS)
    resolved = resolve_model(args)
    model = build_meta_model(resolved.config, dtype)
    plan = plan_device_map(model, [gpu_budget] * args.gpus, cpu_budget, dtype)
    cost = forward_cost(plan, card)
    code = snippet(resolved.load_id, type(model).__name__, [gpu_budget] * args.gpus, cpu_budget, dtype,
                   plan.disk_bytes > 0)
    if args.json:
        print_json({"model": resolved.load_id, "gpu": card.key, **plan.to_json(), "cost": cost.to_json(), "snippet": code})
        return 0
    print(f"Model: {resolved.load_id}   {dtype}   total {format_bytes(plan.total_bytes)}")
    print(render_table(["from", "to", "modules", "device"], [[a, b, str(n), d] for a, b, d, n in compact_map(plan.device_map)]))
    print(f"On GPUs {format_bytes(plan.gpu_bytes)}, CPU {format_bytes(plan.cpu_bytes)}, disk {format_bytes(plan.disk_bytes)}.")
    print(f"One forward pass: {cost.seconds * 1000:.1f} ms against {cost.all_on_gpu_seconds * 1000:.1f} ms with every "
          f"weight in GPU memory (x{cost.slowdown:.1f}; {cost.link} at {cost.link_gbs:.0f} GB/s).")
    print(code)
    return 0
