"""`data-parallel MODEL --gpu G --samples N`: the time to process N samples on k GPUs."""

from __future__ import annotations

from ._common import add_command, find_gpu, platform_gpus, print_json, resolve_model


def register(commands, shared) -> None:
    from ..speed import NETWORKS_GBS

    p = add_command(commands, "data-parallel", shared, ("model", "json"), run,
                    help="time to process N samples on k GPUs, one node or several")
    p.add_argument("--gpu", required=True, help="GPU key from the GPU catalog")
    p.add_argument("--samples", type=int, required=True, help="samples to process")
    p.add_argument("--tokens", type=int, default=512, help="tokens per sample (default 512)")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--network", choices=list(NETWORKS_GBS), default=next(iter(NETWORKS_GBS)))
    p.add_argument("--training", action="store_true", help="training (gradient all-reduce) instead of inference")


def run(args) -> int:
    from ..inference import check_sizes, largest_batch
    from ..speed import data_parallel_inference, data_parallel_training, generation

    card = find_gpu(args.gpu)
    args.gpus_per_node = platform_gpus(args, 8, "gpus_per_node")
    for name, value in (("samples", args.samples), ("gpus-per-node", args.gpus_per_node), ("nodes", args.nodes)):
        check_sizes(value, 1) if name != "samples" else check_sizes(1, value)
    check_sizes(1, args.tokens)
    model = resolve_model(args)
    if args.training:
        one = data_parallel_training(model.summary, card, args.samples, args.tokens, 1, 1, args.network)
        many = data_parallel_training(model.summary, card, args.samples, args.tokens, args.gpus_per_node,
                                      args.nodes, args.network)
        single, total, extra = one.seconds, many.seconds, many.to_json()
    else:
        batch = max(1, min(largest_batch(model.summary, model.spec, card.memory_bytes, args.tokens), 256))
        run = generation(model.summary, model.spec, card, "bfloat16", batch, args.tokens, 1)
        single = data_parallel_inference(run, args.samples, 1)
        total = data_parallel_inference(run, args.samples, args.gpus_per_node * args.nodes)
        extra = {"batch": batch}
    result = {"model": model.name, "gpu": card.key, "training": args.training, "gpus": args.gpus_per_node * args.nodes,
              "nodes": args.nodes, "one_gpu_seconds": single, "seconds": total, "speedup": single / total, **extra}
    if args.json:
        print_json(result)
        return 0
    print(f"{model.name} on {result['gpus']} x {card.name} ({args.nodes} node(s)): {total:.1f} s "
          f"instead of {single:.1f} s on one GPU, speed-up x{single / total:.2f}")
    return 0
