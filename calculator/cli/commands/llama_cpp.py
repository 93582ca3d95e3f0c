"""`llama-cpp MODEL --gpu G --type Q4_K --context C`: how many layers llama.cpp's `-ngl` can
put on the GPU, the memory on each side, and the slowdown of decoding; for a mixture of experts,
`--n-cpu-moe N` weighed against it, and the faster command."""

from __future__ import annotations

from calculator.core.errors import CalculatorError
from calculator.core.units import format_bytes
from calculator.cli.commands._common import add_command, find_gpu, print_json, render_table, resolve_model


def register(commands, shared) -> None:
    from calculator.distributed.llama_cpp import CACHE_TYPES, DEFAULT_CPU_GBS, GGUF_TYPES

    p = add_command(commands, "llama-cpp", shared, ("model", "json"), run,
                    help="llama.cpp: the largest -ngl for a GPU, GGUF type and context; memory on each side; slowdown")
    p.add_argument("--gpu", default="rtx4090", help="GPU key (default rtx4090)")
    p.add_argument("--type", default="Q4_K", help=f"GGUF quantization type: {', '.join(GGUF_TYPES)} (default Q4_K)")
    p.add_argument("--context", type=int, default=8192, help="context length, -c (default 8192)")
    p.add_argument("--cache-type", default="f16", choices=tuple(CACHE_TYPES),
                   help="KV cache type, --cache-type-k/-v (default f16)")
    p.add_argument("--cpu-bandwidth", type=float, default=DEFAULT_CPU_GBS,
                   help=f"host memory bandwidth in GB/s (default {DEFAULT_CPU_GBS}: dual-channel DDR5-4800)")


def run(args) -> int:
    from calculator.distributed.llama_cpp import plan_llama_cpp

    card = find_gpu(args.gpu)
    model = resolve_model(args)
    if model.spec is None:
        raise CalculatorError("llama_cpp_decoder_only", kind="unknown")
    plan = plan_llama_cpp(model.summary, model.spec, card, args.type, args.context, args.cache_type,
                          args.cpu_bandwidth, config=model.config)
    if args.json:
        print_json({"model": model.name, **plan.to_json()})
        return 0
    layout, side = plan.layout, plan.split
    print(f"Model: {model.name}   {layout.type} (output {layout.head_type})   -c {layout.context} "
          f"({layout.cells} cells, KV cache {layout.cache_type})   GPU: {card.name}")
    print(f"Largest -ngl: {plan.ngl} of {layout.layers + 1} ({side.gpu_layers} of {layout.layers} layers"
          f"{' and the output layer' if side.output_on_gpu else ''}) within {format_bytes(plan.limit_bytes)} "
          f"(usable {format_bytes(plan.usable_bytes)} less the 5% headroom).")
    print(render_table(["", "weights", "KV cache", "compute buffer", "total"], [
        ["GPU", format_bytes(side.gpu_weights_bytes), format_bytes(side.gpu_kv_bytes),
         format_bytes(side.gpu_compute_bytes), format_bytes(side.gpu_bytes)],
        ["CPU RAM", format_bytes(side.cpu_weights_bytes), format_bytes(side.cpu_kv_bytes),
         format_bytes(side.cpu_compute_bytes), format_bytes(side.cpu_bytes)]]))
    print(f"Decoding: about {plan.tokens_per_second:.1f} tokens/s at best, x{plan.slowdown:.2f} the time per token of "
          f"everything on the GPU ({card.bandwidth_gbs:.0f} GB/s on the GPU, {plan.cpu_gbs:g} GB/s in CPU memory).")
    if plan.moe is not None:
        moe = plan.moe
        verdict = "faster: use it" if plan.better == "n-cpu-moe" else "not faster than -ngl here"
        print(f"Mixture of experts: -ngl 999 --n-cpu-moe {moe.n_cpu_moe} keeps attention, the KV cache and the "
              f"experts of the last {layout.layers - moe.n_cpu_moe} layers on the GPU "
              f"({format_bytes(moe.gpu_bytes)}), the experts of the first {moe.n_cpu_moe} in CPU RAM "
              f"({format_bytes(moe.cpu_bytes)} with the embeddings): about {moe.tokens_per_second:.1f} tokens/s, "
              f"{verdict}.")
    print("Units: GiB = 2^30 bytes. The compute buffer is an estimate: llama.cpp prints its own at start.")
    print(plan.command())
    return 0
