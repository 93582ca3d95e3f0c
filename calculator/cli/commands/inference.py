"""`inference MODEL --batch B (--context T | --prompt P [--new-tokens N])`: peak memory of
inference (weights, KV cache, activation peak) read three ways; with --gpu, the verdict and
the largest batch and context that fit."""

from __future__ import annotations

from calculator.core.precision import DTYPES
from calculator.core.units import format_bytes
from calculator.cli.commands._common import (add_command, budget_for, find_gpu, print_card_precision, print_json,
                                             readings_lines, render_table, resolve_model)


def register(commands, shared) -> None:
    from calculator.memory.inference import ATTENTION, CACHES, COMPUTE_DTYPES, MODES
    from calculator.memory.quantization import FORMAT_KEYS

    formats = [f for f in FORMAT_KEYS if f != "bfloat16"]
    p = add_command(commands, "inference", shared, ("model", "trust", "json"), run,
                    help="peak memory of inference: weights, KV cache, activation peak")
    p.add_argument("--batch", type=int, required=True, help="sequences processed together")
    p.add_argument("--context", type=int, default=None,
                   help="tokens per sequence, all of them in the prompt (the worst case of a generation)")
    p.add_argument("--prompt", type=int, default=None, help="prompt tokens per sequence (with --new-tokens)")
    p.add_argument("--new-tokens", type=int, default=0, help="tokens generated per sequence (default 0)")
    p.add_argument("--cache", choices=CACHES, default="dynamic",
                   help="dynamic: the cache grows token by token (default); static: allocated in full up front; "
                        "legacy: the tuple cache of transformers before 4.36 (two whole caches at the last step)")
    p.add_argument("--dtype", default=None,
                   help=f"weight storage: a dtype ({', '.join(DTYPES)}; int8 and int4 are the rule of thumb's "
                        f"ideal sizes) or a real format ({', '.join(formats)}); default bfloat16, or float16 "
                        f"on a --gpu without bfloat16 tensor cores (T4, V100, P100), as `speed`")
    p.add_argument("--compute-dtype", choices=COMPUTE_DTYPES, default="float32",
                   help="bitsandbytes 4-bit compute dtype (bnb_4bit_compute_dtype; transformers' default float32)")
    p.add_argument("--kv-dtype", default=None, help="cache precision if not the compute dtype (e.g. float8)")
    p.add_argument("--attention", choices=ATTENTION, default="sdpa", help="attention implementation (default sdpa)")
    p.add_argument("--mode", choices=MODES, default=None,
                   help="generate: logits of the last position; loglikelihood: float32 log-probabilities of every "
                        "position; forward: one forward, no cache (default: generate if the model generates, "
                        "else forward)")
    p.add_argument("--gpu", default=None, help="GPU key: adds the verdict and the largest batch and context")
    p.add_argument("--workload", default=None, help="generation, forward, seq2seq, speech or vision (default: the "
                   "model's own; speech: Whisper's 30 s window and its task tokens, no --prompt needed)")
    p.add_argument("--encoder", type=int, default=None,
                   help="an encoder-decoder's input tokens (seq2seq); the decoder starts from its start token")
    p.add_argument("--measured", type=float, default=None,
                   help="with --gpu: the speed you measured for this run (tokens/s for generation, items/s "
                        "otherwise): the fraction of the roofline it reaches and the section to read next")


def run(args) -> int:
    from calculator.core.budget import readings_of
    from calculator.memory.inference import inference_memory

    from calculator.core.errors import CalculatorError

    card = find_gpu(args.gpu)
    if args.measured is not None and card is None:
        raise CalculatorError("measured_needs_gpu")
    model = resolve_model(args)
    workload, length, mode = _lengths(args, model.spec)
    from calculator.answers.verdicts import card_dtype

    dtype, precision = card_dtype(card, args.dtype)
    options = {"dtype": dtype, "kv_dtype": args.kv_dtype, "attention": args.attention, "mode": mode,
               "cache": args.cache, "bnb_compute_dtype": args.compute_dtype}
    from calculator.answers.inference_json import inference_json

    memory = inference_memory(model.summary, model.spec, args.batch, **length, **options)
    readings = readings_of(memory, budget_for(card))
    result = inference_json(model, card, args.batch, length, options, workload, work=_work(workload, length, mode),
                            precision=precision)
    if args.measured is not None:
        result["measured"] = _measured(args, model, card, workload, memory, dtype)
    if args.json:
        print_json(result)
        return 0
    attention = memory.attention_used + ("" if memory.attention_used == memory.attention else
                                         f" (the model has no {memory.attention} path in transformers)")
    if memory.attention_used == "flash":
        attention = (f"{memory.attn_implementation} (no sdpa path in transformers: pass "
                     f"attn_implementation={memory.attn_implementation!r} with the kernels package, else eager runs)")
    length_text = (f"{memory.prompt} + {memory.new_tokens} new tokens ({memory.cache} cache)" if memory.new_tokens
                   else f"{memory.context} tokens")
    if memory.encoder_tokens:
        length_text = f"{memory.encoder_tokens} encoder tokens, decoder {length_text}"
    print(f"Model: {model.name} ({model.source})   batch {args.batch} x {length_text}   "
          f"{memory.weights_format} weights, {memory.kv_dtype} cache, {attention} attention, {memory.mode}")
    print_card_precision(card, precision)
    rows = [["weights", format_bytes(memory.weights_bytes)], ["KV cache", format_bytes(memory.kv_cache_bytes)],
            ["activation peak", f"{format_bytes(memory.activation_peak_bytes)} (at: {memory.peak_moment})"]]
    if memory.quantized_matmul_bytes:
        rows.append(["  of which quantized matmuls", format_bytes(memory.quantized_matmul_bytes)])
    rows.append(["total (allocated)", format_bytes(memory.total_bytes)])
    print(render_table(["part", "memory"], rows))
    for line in readings_lines(readings, card):
        print(line)
    if card:
        limit = " (the model's own limit)" if result["largest_context"] == model.spec.max_positions else ""
        print(f"Largest batch that fits: {result['largest_batch']} (tight: {result['largest_batch_tight']}); "
              f"largest context at batch {args.batch}: {result['largest_context']} tokens{limit} "
              f"(tight: {result['largest_context_tight']}), all of it in the prompt (the worst case of a "
              f"generation that long).")
    if args.measured is not None:
        m = result["measured"]
        print(f"Measured {m['measured']:g} {m['unit'].replace('_', ' ')}: {m['fraction']:.0%} of the roofline "
              f"({m['ceiling']:.4g}); read next: {m['next_section']}.")
    print("Units: GiB = 2^30 bytes.")
    return 0


def _measured(args, model, card, workload: str, memory, dtype: str) -> dict:
    """The measured speed against the roofline of the run this command sized."""
    from calculator.memory.workload_speed import against_ceiling, workload_speed
    from calculator.memory.workloads import Shape

    if memory.mode != "generate":
        run = Shape("vision" if workload == "vision" else "forward", "forward", memory.context, 0)
    else:
        run = Shape(workload if memory.encoder_tokens else "generation", "generate", memory.prompt,
                    memory.new_tokens or 1, memory.encoder_tokens or None)
    speed = workload_speed(model.summary, model.spec, card, dtype, args.batch, run)
    return {"unit": speed.unit, **against_ceiling(args.measured, speed).to_json()}


def _work(workload: str, length: dict, mode: str | None):
    """The workload's run (workloads.Shape) behind these lengths, for the answers that vary its
    length (the largest context: a seq2seq encoder's input, one window or image for speech and
    vision); None for a generation and for an encoder-decoder read the old way (no --workload)."""
    from calculator.memory.workloads import Shape

    if "encoder_tokens" in length:
        return Shape(workload, "generate", length["prompt"], length["new_tokens"], length["encoder_tokens"])
    if mode == "forward" and workload in ("forward", "vision") and "context" in length:
        return Shape(workload, "forward", length["context"], 0)
    return None


def _lengths(args, spec) -> tuple[str, dict, str | None]:
    """(workload, inference_memory's lengths, mode). Without --workload or --encoder, the
    lengths read as they always have (an encoder-decoder's prompt is its encoder's input and
    its decoder as long), except for speech, whose encoder input is always its 30 s window."""
    from calculator.core.errors import CalculatorError
    from calculator.memory.workloads import check_workload, default_workload, shape

    workload = check_workload(spec, args.workload) if args.workload else default_workload(spec)
    separate = workload == "speech" or args.encoder is not None or args.workload == "seq2seq"
    if separate and spec.kind == "encoder-decoder":
        if args.context is not None:
            raise CalculatorError("context_or_prompt")
        encoder = args.encoder if args.encoder is not None else args.prompt
        run = shape(spec, workload, new_tokens=args.new_tokens, encoder=encoder)
        lengths = dict(run.memory_lengths)
        if workload == "speech" and args.prompt is not None:
            lengths["prompt"] = args.prompt  # the decoder's prompt (previous text) beside its task tokens
        return workload, {k: v for k, v in lengths.items() if k != "mode"}, "generate"
    if args.encoder is not None:
        raise CalculatorError("encoder_needs_encoder_decoder", model_type=spec.model_type or spec.kind)
    if workload == "vision" and args.context is None and args.prompt is None and spec.encoder_tokens:
        return workload, {"context": spec.encoder_tokens}, "forward"  # the image's patches, from the config
    if (args.context is None) == (args.prompt is None) or (args.context is not None and args.new_tokens):
        raise CalculatorError("context_or_prompt")  # --new-tokens goes with --prompt only
    length = {"context": args.context} if args.prompt is None else {"prompt": args.prompt, "new_tokens": args.new_tokens}
    mode = args.mode or ("forward" if workload in ("forward", "vision") and args.workload else None)
    return workload, length, mode

