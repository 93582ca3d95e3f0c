"""`data-parallel MODEL --gpu G --samples N`: the time to process N samples on k GPUs."""

from __future__ import annotations

from calculator.cli.commands._common import add_command, find_gpu, platform_gpus, print_json, resolve_model


def register(commands, shared) -> None:
    from calculator.memory.speed import NETWORKS_GBS
    from calculator.memory.workloads import WORKLOADS

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
    p.add_argument("--workload", choices=WORKLOADS, default=None,
                   help="generation, forward, seq2seq, speech or vision (default: the model's own, as the page)")
    p.add_argument("--new-tokens", type=int, default=256,
                   help="seq2seq and speech: the tokens each answer has (default 256, the slow-model chapter's)")
    p.add_argument("--dtype", default="bfloat16",
                   help="precision (default bfloat16; float16 on a card without bfloat16 tensor cores, such as a T4)")


def run(args) -> int:
    from calculator.core import limits
    from calculator.core.precision import normalize_dtype
    from calculator.answers.verdicts import data_parallel_answer
    from calculator.memory.workloads import check_workload, default_workload, shape

    card = find_gpu(args.gpu)
    args.gpus_per_node = platform_gpus(args, 8, "gpus_per_node")
    for name, value in (("samples", args.samples), ("gpus_per_node", args.gpus_per_node), ("nodes", args.nodes),
                        ("tokens", args.tokens), ("new_tokens", args.new_tokens)):
        limits.check(name, value)
    dtype = normalize_dtype(args.dtype)
    model = resolve_model(args)
    workload = check_workload(model.spec, args.workload) if args.workload else default_workload(model.spec)
    # the items the page divides over the GPUs: a sample of --tokens, read in the model's workload
    work = shape(model.spec, workload, prompt=args.tokens, new_tokens=args.new_tokens, sequence=args.tokens)
    answer = data_parallel_answer(model, card, args.samples, args.tokens, args.gpus_per_node, args.nodes,
                                  args.network, args.training, dtype, work=work)
    from calculator.answers.parallel_json import data_parallel_json

    result = data_parallel_json(model, card, answer, args.samples, args.tokens, args.gpus_per_node, args.network)
    if args.json:
        print_json(result)
        return 0
    single, total = result["one_gpu_seconds"], result["seconds"]
    print(f"{model.name} on {result['gpus']} x {card.name} ({args.nodes} node(s)), {result['dtype']}: {total:.1f} s "
          f"instead of {single:.1f} s on one GPU, speed-up x{single / total:.2f}")
    return 0
