"""python -m calculator <command> ... [--json]

Human output is a table with explicit units; --json prints one object with sizes in bytes.
Bad input: exit code 2 and one line saying what is wrong and what to do, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import catalog
from .errors import CalculatorError
from .precision import DEFAULT_DTYPES, DTYPES
from .units import format_bytes, format_count

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line and use our exit code."""

    def error(self, message: str):  # noqa: D401 - argparse's API
        raise CalculatorError("cli_usage", detail=message, command=self.prog)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m calculator", description="Memory calculator for transformer models.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for register in COMMANDS:
        register(commands)
    return parser


def _add_estimate(commands) -> None:
    p = commands.add_parser("estimate", help="memory to load a model, per precision")
    p.add_argument("model", metavar="MODEL", help="catalog name, path to config.json (or its folder), or Hub id")
    p.add_argument("--dtypes", nargs="+", default=list(DEFAULT_DTYPES), metavar="D",
                   help=f"precisions to show ({', '.join(DTYPES)}); default: {' '.join(DEFAULT_DTYPES)}")
    p.add_argument("--model-class", choices=("auto", "base"), default="auto",
                   help="auto: the checkpoint's own class (with its head); base: the bare AutoModel, as accelerate builds it")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="let transformers run the code of the model's repository (only if you trust it)")
    p.add_argument("--units", choices=("GiB", "GB"), default="GiB", help="binary (GiB, default) or decimal (GB) units")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes")
    p.set_defaults(run=_run_estimate)


def _run_estimate(args) -> int:
    from .estimate import estimate

    result = estimate(args.model, args.dtypes, args.model_class, allow_local=True,
                      trust_remote_code=args.trust_remote_code)
    if args.json:
        _print_json(result.to_json())
        return 0
    s = result.summary
    system = "binary" if args.units == "GiB" else "decimal"
    size = lambda n: format_bytes(n, system=system)  # noqa: E731
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
    print(f"Units: {args.units} = {'2^30' if system == 'binary' else '10^9'} bytes. "
          "*As accelerate estimate-memory computes it, for a batch of 1.")
    return 0


def _add_catalog(commands) -> None:
    p = commands.add_parser("catalog", help="the bundled models")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(run=_run_catalog)


def _run_catalog(args) -> int:
    models = []
    for entry in catalog.entries():
        s = catalog.stored_summary(entry.key)
        models.append({"name": entry.key, "id": entry.id, "kind": entry.kind, "attention": entry.attention,
                       "tags": list(entry.tags), "architecture": s.architecture, "parameters": s.parameters,
                       "active_parameters": s.active_parameters})
    if args.json:
        _print_json({"models": models, "versions": catalog.stored_versions()})
        return 0
    rows = [[m["name"], m["id"], m["kind"], m["attention"].upper(), format_count(m["parameters"]),
             ", ".join(m["tags"])] for m in models]
    print(render_table(["name", "Hub id", "kind", "attention", "parameters", "notes"], rows))
    return 0


def _add_refresh(commands) -> None:
    p = commands.add_parser("refresh-catalog", help="recompute the stored catalog counts (maintainers)")
    p.set_defaults(run=lambda args: print(catalog.refresh()) or 0)


def _add_speed(commands) -> None:
    p = commands.add_parser("speed", help="memory, latency and throughput per batch size and precision (roofline)")
    p.add_argument("model", metavar="MODEL", help="catalog name, path to config.json (or its folder), or Hub id")
    p.add_argument("--gpu", required=True, help="GPU key from the GPU catalog (e.g. h100, a100-80gb, rtx4090)")
    p.add_argument("--dtypes", nargs="+", default=["bfloat16"], metavar="D", help="weight precisions")
    p.add_argument("--prompt", type=int, default=1024, help="prompt tokens per sequence (default 1024)")
    p.add_argument("--new-tokens", type=int, default=256, help="tokens generated per sequence (default 256)")
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32], metavar="B", help="batch sizes")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes, times in seconds")
    p.set_defaults(run=_run_speed)


def _run_speed(args) -> int:
    from .estimate import resolve_model
    from .gpus import gpu as find_gpu
    from .inference import check_sizes, inference_memory, largest_batch
    from .precision import normalize_dtype
    from .speed import generation

    card = find_gpu(args.gpu)
    model = resolve_model(args.model, allow_local=True)
    dtypes = [normalize_dtype(d) for d in args.dtypes]
    context = args.prompt + args.new_tokens
    for b in args.batches:
        check_sizes(b, context)
    rows, largest = [], {}
    for dtype in dtypes:
        largest[dtype] = largest_batch(model.summary, model.spec, card.memory_bytes, context, dtype=dtype)
        for b in args.batches:
            memory = inference_memory(model.summary, model.spec, b, context, dtype)
            run = generation(model.summary, model.spec, card, dtype, b, args.prompt, args.new_tokens)
            rows.append({"dtype": dtype, "batch": b, "memory_bytes": memory.total_bytes,
                         "fits": memory.total_bytes <= card.memory_bytes,
                         "time_to_first_token_s": run.time_to_first_token, "time_per_token_s": run.time_per_token,
                         "tokens_per_second": run.tokens_per_second, "decode_bound": run.decode_bound})
    if args.json:
        _print_json({"model": model.name, "gpu": card.key, "gpu_memory_bytes": card.memory_bytes,
                     "prompt": args.prompt, "new_tokens": args.new_tokens, "largest_batch": largest, "rows": rows})
        return 0
    print(f"Model: {model.name}   GPU: {card.name} ({format_bytes(card.memory_bytes)})   "
          f"prompt {args.prompt} + {args.new_tokens} new tokens")
    table = [[r["dtype"], str(r["batch"]), format_bytes(r["memory_bytes"]), "yes" if r["fits"] else "no",
              f"{r['time_to_first_token_s'] * 1000:.1f} ms", f"{r['time_per_token_s'] * 1000:.2f} ms",
              f"{r['tokens_per_second']:.0f}", r["decode_bound"]] for r in rows]
    print(render_table(["dtype", "batch", "memory", "fits", "prefill", "per token", "tokens/s", "decode is"], table))
    print("Largest batch that fits: " + ", ".join(f"{d}: {n}" for d, n in largest.items()))
    print("Roofline estimate from datasheet peaks: a best case; real kernels reach 50-80% of it.")
    return 0


def _add_data_parallel(commands) -> None:
    from .speed import NETWORKS_GBS

    p = commands.add_parser("data-parallel", help="time to process N samples on k GPUs, one node or several")
    p.add_argument("model", metavar="MODEL", help="catalog name, path to config.json (or its folder), or Hub id")
    p.add_argument("--gpu", required=True, help="GPU key from the GPU catalog")
    p.add_argument("--samples", type=int, required=True, help="samples to process")
    p.add_argument("--tokens", type=int, default=512, help="tokens per sample (default 512)")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--network", choices=list(NETWORKS_GBS), default=next(iter(NETWORKS_GBS)))
    p.add_argument("--training", action="store_true", help="training (gradient all-reduce) instead of inference")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_run_data_parallel)


def _run_data_parallel(args) -> int:
    from .estimate import resolve_model
    from .gpus import gpu as find_gpu
    from .inference import check_sizes, largest_batch
    from .speed import data_parallel_inference, data_parallel_training, generation

    card = find_gpu(args.gpu)
    for name, value in (("samples", args.samples), ("gpus-per-node", args.gpus_per_node), ("nodes", args.nodes)):
        check_sizes(value, 1) if name != "samples" else check_sizes(1, value)
    check_sizes(1, args.tokens)
    model = resolve_model(args.model, allow_local=True)
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
        _print_json(result)
        return 0
    print(f"{model.name} on {result['gpus']} x {card.name} ({args.nodes} node(s)): {total:.1f} s "
          f"instead of {single:.1f} s on one GPU, speed-up x{single / total:.2f}")
    return 0


def _add_inference(commands) -> None:
    from .inference import ATTENTION, MODES

    p = commands.add_parser("inference", help="peak memory of inference: weights, KV cache, activation peak")
    p.add_argument("model", metavar="MODEL", help="catalog name, path to config.json (or its folder), or Hub id")
    p.add_argument("--batch", type=int, required=True, help="sequences processed together")
    p.add_argument("--context", type=int, required=True, help="tokens per sequence (prompt and generated tokens)")
    p.add_argument("--dtype", default="bfloat16", help=f"weight precision ({', '.join(DTYPES)}); default bfloat16")
    p.add_argument("--kv-dtype", default=None, help="cache precision if not the compute dtype (e.g. float8)")
    p.add_argument("--attention", choices=ATTENTION, default="sdpa", help="attention implementation (default sdpa)")
    p.add_argument("--mode", choices=MODES, default="generate",
                   help="generate: logits of the last position; loglikelihood: float32 log-probabilities of every position")
    p.add_argument("--gpu", default=None, help="GPU key: adds whether it fits and the largest batch and context")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="let transformers run the code of the model's repository (only if you trust it)")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes")
    p.set_defaults(run=_run_inference)


def _run_inference(args) -> int:
    from .estimate import resolve_model
    from .gpus import gpu as find_gpu
    from .inference import check_sizes, inference_memory, largest_batch, largest_context

    check_sizes(args.batch, args.context)
    card = find_gpu(args.gpu) if args.gpu else None
    model = resolve_model(args.model, allow_local=True, trust_remote_code=args.trust_remote_code)
    options = {"dtype": args.dtype, "kv_dtype": args.kv_dtype, "attention": args.attention, "mode": args.mode}
    memory = inference_memory(model.summary, model.spec, args.batch, args.context, **options)
    result = {"model": model.name, "source": model.source, **memory.to_json()}
    if card:
        result.update(gpu=card.key, gpu_memory_bytes=card.memory_bytes, fits=memory.total_bytes <= card.memory_bytes,
                      largest_batch=largest_batch(model.summary, model.spec, card.memory_bytes, args.context, **options),
                      largest_context=largest_context(model.summary, model.spec, card.memory_bytes, args.batch,
                                                      **options),
                      max_positions=model.spec.max_positions)
    if args.json:
        _print_json(result)
        return 0
    attention = memory.attention_used + ("" if memory.attention_used == memory.attention else
                                         f" (the model has no {memory.attention} path in transformers)")
    print(f"Model: {model.name} ({model.source})   batch {args.batch} x {args.context} tokens   "
          f"{memory.dtype} weights, {memory.kv_dtype} cache, {attention} attention, {memory.mode}")
    rows = [["weights", format_bytes(memory.weights_bytes)], ["KV cache", format_bytes(memory.kv_cache_bytes)],
            ["activation peak", f"{format_bytes(memory.activation_peak_bytes)} (at: {memory.peak_moment})"],
            ["total", format_bytes(memory.total_bytes)]]
    print(render_table(["part", "memory"], rows))
    if card:
        verdict = "fits" if result["fits"] else "does NOT fit"
        print(f"On {card.name} ({format_bytes(card.memory_bytes)}): {verdict}. Largest batch at {args.context} tokens: "
              f"{result['largest_batch']}; largest context at batch {args.batch}: {result['largest_context']} tokens"
              + (" (the model's own limit)." if result["largest_context"] == model.spec.max_positions else "."))
    print("Units: GiB = 2^30 bytes. As torch.cuda.max_memory_allocated() counts; the CUDA context "
          "(several hundred MiB) and the allocator's reserve come on top.")
    return 0


# Each command registers itself here; later chapters append theirs.
COMMANDS = [_add_estimate, _add_catalog, _add_refresh, _add_speed, _add_data_parallel, _add_inference]


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _print_json(data: dict) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if not getattr(args, "run", None):
            raise CalculatorError("cli_no_command")
        return args.run(args)
    except CalculatorError as error:
        print(f"error: {error.message('en')}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
