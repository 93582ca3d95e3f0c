"""`inference MODEL --batch B --context T`: peak memory of inference: weights, KV cache,
activation peak; with --gpu, whether it fits and the largest batch and context."""

from __future__ import annotations

from ..precision import DTYPES
from ..units import format_bytes
from ._common import add_command, find_gpu, print_json, render_table, resolve_model


def register(commands, shared) -> None:
    from ..inference import ATTENTION, MODES

    p = add_command(commands, "inference", shared, ("model", "trust", "json"), run,
                    help="peak memory of inference: weights, KV cache, activation peak")
    p.add_argument("--batch", type=int, required=True, help="sequences processed together")
    p.add_argument("--context", type=int, required=True, help="tokens per sequence (prompt and generated tokens)")
    p.add_argument("--dtype", default="bfloat16", help=f"weight precision ({', '.join(DTYPES)}); default bfloat16")
    p.add_argument("--kv-dtype", default=None, help="cache precision if not the compute dtype (e.g. float8)")
    p.add_argument("--attention", choices=ATTENTION, default="sdpa", help="attention implementation (default sdpa)")
    p.add_argument("--mode", choices=MODES, default="generate",
                   help="generate: logits of the last position; loglikelihood: float32 log-probabilities of every position")
    p.add_argument("--gpu", default=None, help="GPU key: adds whether it fits and the largest batch and context")


def run(args) -> int:
    from ..inference import check_sizes, inference_memory, largest_batch, largest_context

    check_sizes(args.batch, args.context)
    card = find_gpu(args.gpu)
    model = resolve_model(args)
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
        print_json(result)
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
