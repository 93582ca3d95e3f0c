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


def _add_safetensors(commands) -> None:
    p = commands.add_parser("safetensors", help="parameters per dtype of a Hub checkpoint, from its safetensors headers")
    p.add_argument("repo", metavar="HUB_ID", help="a Hub id (only the headers of the weight files are read)")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes")
    p.set_defaults(run=_run_safetensors)


def _run_safetensors(args) -> int:
    from .safetensors import read_headers

    count = read_headers(args.repo)
    if args.json:
        _print_json(count.to_json())
        return 0
    largest = count.largest_unit()
    print(f"Model:      {count.repo} (safetensors headers: {count.files} file(s), {count.tensors} tensors)")
    print(f"Parameters: {format_count(count.elements)} stored elements")
    rows = [[d.dtype, format_count(d.elements), format_bytes(d.bytes)] for d in count.dtypes]
    print(render_table(["dtype", "elements", "bytes"], rows))
    print(f"Stored:     {format_bytes(count.stored_bytes)}")
    if largest is not None:
        print(f"Largest layer (from tensor names): {largest.name} ({format_count(largest.parameters)} elements)")
    if count.packed:
        print("Integer tensors hold packed or quantized weights: their elements are not a weight count; the bytes are exact.")
    print("Units: GiB = 2^30 bytes. No weights were downloaded.")
    return 0


def _add_quantize(commands) -> None:
    from .quantization import DEFAULT_GROUP_SIZE, FORMAT_KEYS

    p = commands.add_parser("quantize", help="memory of a model in each quantization format, from its real matrices")
    p.add_argument("model", metavar="MODEL", help="catalog name, path to config.json (or its folder), or Hub id")
    p.add_argument("--formats", nargs="+", default=list(FORMAT_KEYS), metavar="F",
                   help=f"formats to show ({', '.join(FORMAT_KEYS)}); default: all")
    p.add_argument("--group-size", type=int, default=DEFAULT_GROUP_SIZE, help="GPTQ/AWQ group size (32, 64 or 128)")
    p.add_argument("--gpu", help="GPU key: say which formats fit on it")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes")
    p.set_defaults(run=_run_quantize)


def _run_quantize(args) -> int:
    from .estimate import resolve_model
    from .gpus import gpu as find_gpu
    from .quantization import quant_format, quantize_all

    formats = [quant_format(name) for name in args.formats]
    card = find_gpu(args.gpu) if args.gpu else None
    model = resolve_model(args.model, allow_local=True)
    results = quantize_all(model.summary, model.spec, args.group_size, formats)
    capacity = card.memory_bytes if card else None
    if args.json:
        _print_json({"model": model.name, "parameters": model.summary.parameters, "group_size": args.group_size,
                     "gpu": card.key if card else None, "gpu_memory_bytes": capacity,
                     "rows": [{**r.to_json(), **({"fits": r.total_bytes <= capacity} if card else {})} for r in results]})
        return 0
    print(f"Model: {model.name}   parameters: {format_count(model.summary.parameters)}   GPTQ/AWQ group: {args.group_size}"
          + (f"   GPU: {card.name} ({format_bytes(capacity)})" if card else ""))
    headers = ["format", "bits/quantized weight", "quantized", "kept (16/32-bit)", "total", "bits/param"]
    headers += ["fits"] if card else []
    rows = [[r.format, f"{r.bits_per_quantized_weight:.3f}" if r.quantized_parameters else "-",
             format_bytes(r.quantized_bytes), format_bytes(r.kept_bytes + r.buffers_bytes), format_bytes(r.total_bytes),
             f"{r.bits_per_parameter:.3f}"] + (["yes" if r.total_bytes <= capacity else "no"] if card else [])
            for r in results]
    print(render_table(headers, rows))
    print("Units: GiB = 2^30 bytes. Weights only: leave room for the KV cache and activations.")
    return 0


def _add_pipeline(commands) -> None:
    p = commands.add_parser("pipeline", help="split a model's layers over k GPUs (pipeline parallelism) and the bubble")
    p.add_argument("model", metavar="MODEL", help="catalog name, path to config.json (or its folder), or Hub id")
    p.add_argument("--gpus", type=int, required=True, help="number of GPUs (pipeline stages)")
    p.add_argument("--dtype", default="bfloat16", help=f"weight precision ({', '.join(DTYPES)})")
    p.add_argument("--micro-batches", type=int, default=None, help="micro-batches per batch: prints the bubble")
    p.add_argument("--gpu", help="GPU key: say whether each stage fits")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes")
    p.set_defaults(run=_run_pipeline)


def _run_pipeline(args) -> int:
    from .estimate import resolve_model
    from .gpus import gpu as find_gpu
    from .parallel import bubble_fraction, pipeline_split, tied_head_copy_bytes
    from .precision import normalize_dtype

    dtype = normalize_dtype(args.dtype)
    card = find_gpu(args.gpu) if args.gpu else None
    bubble = bubble_fraction(args.gpus, args.micro_batches) if args.micro_batches is not None else None
    model = resolve_model(args.model, allow_local=True)
    stages = pipeline_split(model.summary, dtype, args.gpus)
    total = model.summary.total_bytes_at(dtype)
    copy = tied_head_copy_bytes(model.summary, model.spec, dtype)
    if args.json:
        _print_json({"model": model.name, "dtype": dtype, "gpus": args.gpus, "total_bytes": total,
                     "stages": [s.to_json() for s in stages], "tied_head_copy_bytes": copy,
                     "micro_batches": args.micro_batches, "bubble_fraction": bubble,
                     "gpu": card.key if card else None,
                     "fits": all(s.bytes <= card.memory_bytes for s in stages) if card else None})
        return 0
    print(f"Model: {model.name}   {dtype}   total {format_bytes(total)} over {args.gpus} GPU(s)")
    rows = [[str(s.gpu), s.first, s.last, str(s.units), format_bytes(s.bytes)]
            + (["yes" if s.bytes <= card.memory_bytes else "no"] if card else []) for s in stages]
    print(render_table(["GPU", "from", "to", "layers", "memory"] + (["fits"] if card else []), rows))
    if copy and args.gpus > 1:
        print(f"The output head shares the embeddings: a stage running it away from them needs a copy ({format_bytes(copy)}).")
    if bubble is not None:
        print(f"Pipeline bubble with {args.micro_batches} micro-batches: {100 * bubble:.1f}% idle, (p - 1) / (m + p - 1).")
    print("Units: GiB = 2^30 bytes. Weights only.")
    return 0


def _add_tensor_parallel(commands) -> None:
    from .parallel import TP_DEGREES

    p = commands.add_parser("tensor-parallel", help="per-GPU weights and all-reduces with tensor parallelism")
    p.add_argument("model", metavar="MODEL", help="catalog name, path to config.json (or its folder), or Hub id")
    p.add_argument("--degree", type=int, required=True, help=f"GPUs sharing each layer ({', '.join(map(str, TP_DEGREES))})")
    p.add_argument("--dtype", default="bfloat16", help=f"weight precision ({', '.join(DTYPES)})")
    p.add_argument("--tokens", type=int, default=2048, help="tokens per forward pass (prompt x batch), default 2048")
    p.add_argument("--gpu", default="h100", help="GPU key: its interconnect and peak throughput (default h100)")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes, times in seconds")
    p.set_defaults(run=_run_tensor_parallel)


def _run_tensor_parallel(args) -> int:
    from .estimate import resolve_model
    from .gpus import gpu as find_gpu
    from .parallel import communication_seconds, links_for, tensor_parallel
    from .precision import normalize_dtype

    dtype = normalize_dtype(args.dtype)
    card = find_gpu(args.gpu)
    model = resolve_model(args.model, allow_local=True)
    result = tensor_parallel(model.summary, model.spec, dtype, args.degree, args.tokens)
    links = {name: communication_seconds(result, gbs) for name, gbs in links_for(card).items()}
    if args.json:
        _print_json({"model": model.name, "gpu": card.key, "tokens": args.tokens, **result.to_json(),
                     "communication_seconds": links, "fits": result.per_gpu_bytes <= card.memory_bytes})
        return 0
    print(f"Model: {model.name}   {dtype}   degree {result.degree}   per GPU {format_bytes(result.per_gpu_bytes)} "
          f"(of which {format_bytes(result.replicated_bytes)} held whole by every GPU), whole model {format_bytes(result.total_bytes)}")
    print(render_table(["matrix", "in x out", "count", "split", "per GPU"],
                       [[m.name, f"{m.in_features} x {m.out_features}", str(m.count), m.split, format_bytes(m.bytes_per_gpu)]
                        for m in result.matrices]))
    print(f"{result.allreduces_per_forward} all-reduces of {format_bytes(result.allreduce_bytes)} per forward "
          f"({args.tokens} tokens):")
    print(render_table(["link", "time per forward"], [[name, f"{s * 1000:.2f} ms"] for name, s in links.items()]))
    print("Units: GiB = 2^30 bytes. Bandwidth only: small messages add latency.")
    return 0


def _parse_size(text: str, name: str) -> int:
    from .units import GB, GIB

    value = str(text).strip()
    for suffix, factor in (("GiB", GIB), ("MiB", 2**20), ("GB", GB), ("MB", 10**6), ("B", 1)):
        if value.endswith(suffix):
            number = value[: -len(suffix)].strip()
            try:
                size = float(number) * factor
            except ValueError:
                break
            if size >= 0:
                return int(size)
            break
    raise CalculatorError("bad_size_text", name=name, value=value[:30])


def _add_offload(commands) -> None:
    p = commands.add_parser("offload", help="accelerate's device map for GPU/CPU budgets, and the cost of offloading")
    p.add_argument("model", metavar="MODEL", help="catalog name, path to config.json (or its folder), or Hub id")
    p.add_argument("--gpu-memory", required=True, help="budget per GPU, e.g. 20GiB")
    p.add_argument("--gpus", type=int, default=1, help="number of GPUs (default 1)")
    p.add_argument("--cpu-memory", required=True, help="CPU memory budget, e.g. 64GiB")
    p.add_argument("--dtype", default="bfloat16", help="float16, bfloat16 or float32")
    p.add_argument("--gpu", default="rtx4090", help="GPU key: its memory bandwidth and PCIe link (default rtx4090)")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes, times in seconds")
    p.set_defaults(run=_run_offload)


def _run_offload(args) -> int:
    from .estimate import resolve_model
    from .gpus import gpu as find_gpu
    from .offload import MAX_GPUS, build_meta_model, compact_map, forward_cost, plan_device_map, snippet
    from .precision import normalize_dtype

    card = find_gpu(args.gpu)
    dtype = normalize_dtype(args.dtype)
    gpu_budget = _parse_size(args.gpu_memory, "--gpu-memory")
    cpu_budget = _parse_size(args.cpu_memory, "--cpu-memory")
    if not 1 <= args.gpus <= MAX_GPUS:
        raise CalculatorError("bad_size", name="number of GPUs", value=args.gpus, high=MAX_GPUS)
    config, model_id = _config_of(args.model)
    model = build_meta_model(config, dtype)
    plan = plan_device_map(model, [gpu_budget] * args.gpus, cpu_budget, dtype)
    cost = forward_cost(plan, card)
    code = snippet(model_id, type(model).__name__, [gpu_budget] * args.gpus, cpu_budget, dtype, plan.disk_bytes > 0)
    if args.json:
        _print_json({"model": model_id, "gpu": card.key, **plan.to_json(), "cost": cost.to_json(), "snippet": code})
        return 0
    print(f"Model: {model_id}   {dtype}   total {format_bytes(plan.total_bytes)}")
    print(render_table(["from", "to", "modules", "device"], [[a, b, str(n), d] for a, b, d, n in compact_map(plan.device_map)]))
    print(f"On GPUs {format_bytes(plan.gpu_bytes)}, CPU {format_bytes(plan.cpu_bytes)}, disk {format_bytes(plan.disk_bytes)}.")
    print(f"One forward pass: {cost.seconds * 1000:.1f} ms against {cost.all_on_gpu_seconds * 1000:.1f} ms with every "
          f"weight in GPU memory (x{cost.slowdown:.1f}; {cost.link} at {cost.link_gbs:.0f} GB/s).")
    print(code)
    return 0


def _config_of(name: str) -> tuple[dict, str]:
    """The config dict of a MODEL argument and the id to load it by."""
    from .configs import read_config_file
    from .estimate import resolve_source
    from .hub import fetch_config

    source = resolve_source(name, allow_local=True)
    if source == "catalog":
        entry = catalog.find(name)
        return catalog.config(entry.key), entry.id
    if source == "local":
        config, path = read_config_file(name)
        return config, str(path.parent)
    return fetch_config(name.strip()), name.strip()


def _add_train(commands) -> None:
    from .training import ACCOUNTINGS, ATTENTION, CHECKPOINTING, METHODS, OPTIMIZER_IMPLS, OPTIMIZERS, PRECISIONS

    p = commands.add_parser("train", help="memory of a training step per GPU: weights, gradients, optimizer, activations")
    p.add_argument("model", metavar="MODEL", help="catalog name, path to config.json (or its folder), or Hub id")
    p.add_argument("--method", choices=METHODS, default="full", help="full fine-tuning, LoRA or QLoRA (default full)")
    p.add_argument("--precision", choices=PRECISIONS, default="mixed",
                   help="mixed: 16-bit weights and gradients, float32 master and states (default); bfloat16: all "
                        "16-bit; float32; amp: float32 weights under torch.autocast")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    p.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS, default="fused",
                   help="PyTorch's fused kernel (default), foreach (a temporary per tensor) or for-loop")
    p.add_argument("--batch", type=int, default=1, help="micro-batch: sequences per GPU per step (default 1)")
    p.add_argument("--sequence", type=int, default=2048, help="tokens per sequence (default 2048)")
    p.add_argument("--checkpointing", choices=CHECKPOINTING, default="none", help="activation recomputation")
    p.add_argument("--attention", choices=ATTENTION, default="sdpa")
    p.add_argument("--accumulation", type=int, default=1, help="micro-batches per optimizer step (default 1)")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-targets", default="all-linear", help="all-linear or module names: q_proj,v_proj")
    p.add_argument("--gpus", type=int, default=1, help="GPUs in all (default 1)")
    p.add_argument("--tensor", type=int, default=1, help="tensor-parallel size")
    p.add_argument("--pipeline", type=int, default=1, help="pipeline stages")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage over the data-parallel GPUs")
    p.add_argument("--offload-optimizer", action="store_true", help="optimizer states on the CPU (ZeRO-Offload)")
    p.add_argument("--offload-params", action="store_true", help="parameters on the CPU too (ZeRO stage 3)")
    p.add_argument("--accounting", choices=ACCOUNTINGS, default="paper",
                   help="paper: the ZeRO paper's model states (default); deepspeed: DeepSpeed's own estimator")
    p.add_argument("--gpu", help="GPU key: adds whether it fits, the largest micro-batch and the fewest GPUs")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="let transformers run the code of the model's repository (only if you trust it)")
    p.add_argument("--units", choices=("GiB", "GB"), default="GiB", help="binary (GiB, default) or decimal (GB) units")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes")
    p.set_defaults(run=_run_train)


def _model_config(model, name: str) -> dict | None:
    """The config dict behind a resolved model: how its layers compute (norms, activation,
    dropout), beyond the shapes in its summary."""
    if model.source == "catalog":
        return catalog.config(catalog.find(name).key)
    if model.source == "local":
        from .configs import read_config_file

        return read_config_file(name)[0]
    from .hub import fetch_config

    return fetch_config(name.strip())


def _run_train(args) -> int:
    from .estimate import resolve_model
    from .gpus import gpu as find_gpu
    from .training import (STRATEGIES, Layout, TrainingSetup, fewest_gpus, largest_micro_batch,
                           rule_of_thumb_bytes, traits_from_config, training_memory)

    card = find_gpu(args.gpu) if args.gpu else None
    setup = TrainingSetup(method=args.method, precision=args.precision, optimizer=args.optimizer,
                          micro_batch=args.batch, sequence=args.sequence, checkpointing=args.checkpointing,
                          attention=args.attention, gradient_accumulation=args.accumulation,
                          lora_rank=args.lora_rank, lora_targets=args.lora_targets, optimizer_impl=args.optimizer_impl)
    layout = Layout(gpus=args.gpus, tensor=args.tensor, pipeline=args.pipeline, zero=args.zero,
                    offload_optimizer=args.offload_optimizer, offload_parameters=args.offload_params,
                    accounting=args.accounting)
    model = resolve_model(args.model, allow_local=True, trust_remote_code=args.trust_remote_code)
    traits = traits_from_config(_model_config(model, args.model), model.summary.model_type)
    memory = training_memory(model.summary, model.spec, setup, layout, traits)
    result = {"model": model.name, "source": model.source, **memory.to_json(),
              "rule_of_thumb_bytes": rule_of_thumb_bytes(model.summary.parameters),
              "setup": {k: v for k, v in setup.__dict__.items() if k != "device"},
              "layout": {**layout.__dict__, "data": layout.data}}
    if card is not None:
        result.update({"gpu": card.key, "gpu_memory_bytes": card.memory_bytes,
                       "fits": memory.total_bytes <= card.memory_bytes,
                       "largest_micro_batch": largest_micro_batch(model.summary, model.spec, card.memory_bytes,
                                                                  setup, layout, traits),
                       "fewest_gpus": [fewest_gpus(model.summary, model.spec, card.memory_bytes, strategy, setup,
                                                   traits).to_json() for strategy in STRATEGIES]})
    if args.json:
        _print_json(result)
        return 0
    system = "binary" if args.units == "GiB" else "decimal"
    size = lambda n: format_bytes(n, system=system)  # noqa: E731
    print(f"Model: {model.name} ({model.source}), {format_count(model.summary.parameters)} parameters, "
          f"{format_count(memory.trainable_parameters)} trained")
    print(f"Setup: {args.method}, {args.precision}, {args.optimizer}, micro-batch {args.batch} x {args.sequence} "
          f"tokens, checkpointing {args.checkpointing}")
    print(f"GPUs:  {layout.gpus} = {layout.data} data x {layout.tensor} tensor x {layout.pipeline} pipeline, "
          f"ZeRO stage {layout.zero}" + (", optimizer on the CPU" if layout.offload_optimizer else "")
          + (", parameters on the CPU" if layout.offload_parameters else ""))
    rows = [["weights (with float32 master copy)", size(memory.weights_bytes), size(memory.at_peak["weights"])],
            ["gradients", size(memory.gradients_bytes), size(memory.at_peak["gradients"])],
            ["optimizer states", size(memory.optimizer_bytes), size(memory.at_peak["optimizer"])],
            ["activations (kept for backward)", size(memory.activations_bytes), size(memory.at_peak["activations"])],
            ["communication buffers", size(memory.buffers_bytes), size(memory.at_peak["buffers"])],
            ["temporaries", "", size(memory.at_peak["temporary"])],
            ["peak per GPU", "", size(memory.total_bytes)]]
    print(render_table(["per GPU", "full size", "at the peak"], rows))
    print(f"The peak comes at the {memory.peak_moment} ({memory.peak_phase}); "
          f"forward/backward {size(memory.forward_backward_bytes)}, optimizer step {size(memory.optimizer_step_bytes)}.")
    if memory.cpu_bytes:
        print(f"On the CPU: {size(memory.cpu_bytes)} per GPU.")
    print(f"Rule of thumb (8 bytes per parameter, bfloat16 full fine-tuning): {size(result['rule_of_thumb_bytes'])}.")
    if card is not None:
        verdict = "fits" if result["fits"] else "does not fit"
        print(f"On a {card.name} ({size(card.memory_bytes)}): {verdict}; largest micro-batch "
              f"{result['largest_micro_batch']}.")
        counts = [[c["strategy"], str(c["gpus"]) if c["gpus"] else "more than 4096"] for c in result["fewest_gpus"]]
        print(render_table(["strategy", "fewest GPUs"], counts))
    print(f"Units: {args.units} = {'2^30' if system == 'binary' else '10^9'} bytes.")


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


def _add_accuracy(commands) -> None:
    p = commands.add_parser("accuracy", help="how close the estimates came to measured memory (bench/results)")
    p.add_argument("--rows", action="store_true", help="every measurement, not only the summary per kind")
    p.add_argument("--json", action="store_true", help="one JSON object, sizes in bytes")
    p.set_defaults(run=_run_accuracy)


def _run_accuracy(args) -> int:
    from bench import RESULTS_DIR  # where the harness writes; the engine takes the folder as a parameter

    from .accuracy import latest_runs, summarize

    runs = latest_runs(RESULTS_DIR)
    if args.json:
        _print_json({"runs": [{"file": run.path.name, "started": run.started, "complete": run.complete,
                               "device": run.device, "versions": run.versions,
                               "summary": [s.__dict__ for s in summarize(run.rows)],
                               "rows": [r.__dict__ for r in run.rows]} for run in runs]})
        return 0
    if not runs:
        print("No result file yet: run python -m bench.accuracy to measure.")
        return 0
    for run in runs:
        device = run.device
        print(f"{device['type'].upper()}: {device.get('name', '?')}, {run.started}, "
              + ", ".join(f"{k} {v}" for k, v in run.versions.items()) + f" ({run.path.name})")
        if device.get("cuda_context_bytes"):
            print(f"CUDA context, outside PyTorch's allocator and not in the figures: "
                  f"{format_bytes(device['cuda_context_bytes'])}")
        print(render_table(["kind", "target", "rows", "within target", "median |error|", "largest |error|"],
                           [[s.kind, f"{s.target:.1%}", str(s.cases), str(s.within), f"{s.median_abs_error:.2%}",
                             f"{s.largest_abs_error:.2%}"] for s in summarize(run.rows)]))
        if args.rows:
            print(render_table(["kind", "model", "settings", "split", "measured", "predicted", "error", ""],
                               [[r.kind, r.model, " ".join(f"{k}={v}" for k, v in r.settings.items()
                                                           if k not in ("device", "double_quant",
                                                                        "gradient_accumulation")),
                                 r.split, format_bytes(r.measured_bytes), format_bytes(r.predicted_bytes),
                                 f"{r.error:+.2%}", "" if r.within_target else "MISSED"] for r in run.rows]))
        print()
    print("Errors are predicted / measured - 1. Units: GiB = 2^30 bytes.")
    return 0


# Each command registers itself here; later chapters append theirs.
COMMANDS = [_add_estimate, _add_catalog, _add_refresh, _add_speed, _add_data_parallel, _add_inference,
            _add_safetensors, _add_quantize, _add_pipeline, _add_tensor_parallel, _add_offload, _add_train,
            _add_accuracy]


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
