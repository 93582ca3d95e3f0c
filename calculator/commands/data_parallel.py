"""`data-parallel MODEL --gpu G --samples N`: the time to process N samples on k GPUs."""

from __future__ import annotations

from ._common import add_command, find_gpu, platform_gpus, print_json, resolve_model


def register(commands, shared) -> None:
    from ..speed import NETWORKS_GBS

    p = add_command(commands, "data-parallel", shared, ("model", "json"), run,
                    help="time to process N samples on k GPUs, one node or several")
    p.add_argument("--gpu", required=True, help="GPU key from the GPU catalog")
    p.add_argument("--samples", type=int, required=True, help="samples to process")
    p.add_argument("--tokens", type=int, default=1024,
                   help="tokens per sample (default 1024, the slow-model chapter's prompt)")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--network", choices=list(NETWORKS_GBS), default=next(iter(NETWORKS_GBS)))
    p.add_argument("--training", action="store_true", help="training (gradient all-reduce) instead of inference")
    p.add_argument("--dtype", default="bfloat16",
                   help="precision (default bfloat16; float16 on a card without bfloat16 tensor cores, such as a T4)")


def run(args) -> int:
    from .. import limits
    from ..precision import normalize_dtype
    from ..verdicts import data_parallel_answer

    card = find_gpu(args.gpu)
    args.gpus_per_node = platform_gpus(args, 8, "gpus_per_node")
    for name, value in (("samples", args.samples), ("gpus_per_node", args.gpus_per_node), ("nodes", args.nodes),
                        ("tokens", args.tokens)):
        limits.check(name, value)
    dtype = normalize_dtype(args.dtype)
    model = resolve_model(args)
    answer = data_parallel_answer(model, card, args.samples, args.tokens, args.gpus_per_node, args.nodes,
                                  args.network, args.training, dtype)
    from ..answers_parallel import data_parallel_json

    result = data_parallel_json(model, card, answer, args.samples, args.tokens, args.gpus_per_node, args.network)
    if args.json:
        print_json(result)
        return 0
    single, total = result["one_gpu_seconds"], result["seconds"]
    print(f"{model.name} on {result['gpus']} x {card.name} ({args.nodes} node(s)), {result['dtype']}: {total:.1f} s "
          f"instead of {single:.1f} s on one GPU, speed-up x{single / total:.2f}")
    return 0
