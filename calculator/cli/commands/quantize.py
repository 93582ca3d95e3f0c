"""`quantize MODEL`: memory of a model in each quantization format, from its real matrices."""

from __future__ import annotations

from calculator.core.units import format_bytes, format_count
from calculator.cli.commands._common import VERDICT_MARKS, add_command, find_gpu, print_json, render_table, resolve_model


def register(commands, shared) -> None:
    from calculator.memory.quantization import DEFAULT_GROUP_SIZE, FORMAT_KEYS

    p = add_command(commands, "quantize", shared, ("model", "json"), run,
                    help="memory of a model in each quantization format, from its real matrices")
    p.add_argument("--formats", nargs="+", default=list(FORMAT_KEYS), metavar="F",
                   help=f"formats to show ({', '.join(FORMAT_KEYS)}); default: all")
    p.add_argument("--group-size", type=int, default=DEFAULT_GROUP_SIZE, help="GPTQ/AWQ group size (32, 64 or 128)")
    p.add_argument("--gpu", help="GPU key: say which formats fit on it, with the inference run below")
    p.add_argument("--batch", type=int, default=1, help="with --gpu: sequences run together (default 1)")
    p.add_argument("--prompt", type=int, default=2048, help="with --gpu: prompt tokens per sequence (default 2048)")
    p.add_argument("--new-tokens", type=int, default=512, help="with --gpu: tokens generated (default 512)")
    p.add_argument("--workload", default=None,
                   help="with --gpu: generation, forward, seq2seq, speech or vision (default: the model's own); "
                        "forward: one pass over --prompt tokens; seq2seq: an encoder input of --prompt tokens and "
                        "an answer of --new-tokens; speech: Whisper's 30 s window; vision: the image's patches")


def run(args) -> int:
    from calculator.core.errors import CalculatorError
    from calculator.memory.format_support import support_of
    from calculator.memory.inference import MAX_TOKENS, check_sizes
    from calculator.memory.quantization import quant_format, quantize_all, shipped_format
    from calculator.answers.verdicts import formats_answer

    formats = [quant_format(name) for name in args.formats]
    card = find_gpu(args.gpu)
    if card is not None:  # each value named in its own message, as `speed` does
        for name, value in (("prompt", args.prompt), ("number of new tokens", args.new_tokens)):
            if not 1 <= value <= MAX_TOKENS:
                raise CalculatorError("bad_size", name=name, value=str(value)[:30], high=MAX_TOKENS)
        check_sizes(args.batch, args.prompt + args.new_tokens)
    model = resolve_model(args)
    work = _work(args, model.spec) if card is not None else None
    answer = formats_answer(model, card, args.batch, args.prompt, args.new_tokens, args.group_size, formats,
                            work=work if work is not None and work.workload != "generation" else None) \
        if card is not None else None
    results = answer.detail if answer else quantize_all(model.summary, model.spec, args.group_size, formats)
    peaks = {row["format"]: row for row in answer.figures["formats"]} if answer else {}
    shipped = shipped_format(model.config)
    if args.json:
        from calculator.answers.formats_json import quantize_json

        data = quantize_json(model, card, args.group_size, results, answer, args.batch, args.prompt, args.new_tokens,
                             workload=work.workload if work is not None else None)
        print_json(data)
        return 0
    print(f"Model: {model.name}   parameters: {format_count(model.summary.parameters)}   GPTQ/AWQ group: {args.group_size}"
          + (f"   GPU: {card.name} (usable {format_bytes(answer.figures['usable_bytes'])})" if card else ""))
    headers = ["format", "bits/quantized weight", "quantized", "kept (16/32-bit)", "total", "bits/param",
               "transformers 5", "engines"]
    headers += ["inference peak", "fits"] if card else []
    rows = [[r.format, f"{r.bits_per_quantized_weight:.3f}" if r.quantized_parameters else "-",
             format_bytes(r.quantized_bytes), format_bytes(r.kept_bytes + r.buffers_bytes), format_bytes(r.total_bytes),
             f"{r.bits_per_parameter:.3f}", _transformers_cell(support_of(r.format)),
             ", ".join(support_of(r.format).engines) or "-"]
            + ([format_bytes(peaks[r.format]["peak_bytes"]), VERDICT_MARKS[peaks[r.format]["verdict"]]] if card else [])
            for r in results]
    print(render_table(headers, rows))
    if shipped:
        print(f"The checkpoint ships in {shipped}.")
    if card:
        print(f"Inference peak: batch {args.batch}, {_run_text(args, work)}. "
              f"Headroom kept: {format_bytes(answer.figures['headroom_bytes'])}.")
    print(("Units: GiB = 2^30 bytes. Weights only: leave room for the KV cache and activations." if not card
           else "Units: GiB = 2^30 bytes.")
          + " transformers 5: the config class that loads the format; cc8.9 / gpt-oss, cc7.5: kept as stored from "
          "that compute capability, dequantized to bfloat16 below; on load only: quantizes a 16-bit checkpoint, "
          "cannot load a stored one.")
    return 0


# What `native` means for the transformers column (calculator/memory/format_support.py).
_CONDITIONS = {"always": "", "cc89": " (cc8.9)", "gpt_oss_cc75": " (gpt-oss, cc7.5)",
               "never_prequantized": " (on load only)", "gguf_kernel": " (where it has a kernel)"}


def _transformers_cell(support) -> str:
    return (support.transformers + _CONDITIONS[support.native]) if support.transformers else "yes"


def _work(args, spec):
    """The workload's run (calculator/memory/workloads.shape), as the quantization page reads its case:
    the prompt is a forward pass's sequence and a seq2seq encoder's input."""
    from calculator.memory.workloads import check_workload, default_workload, shape

    workload = check_workload(spec, args.workload) if args.workload else default_workload(spec)
    return shape(spec, workload, prompt=args.prompt, new_tokens=args.new_tokens, sequence=args.prompt)


def _run_text(args, work) -> str:
    """One item of the run, in the workload's terms."""
    if work.workload == "generation":
        return (f"prompt {args.prompt} + {args.new_tokens} new tokens (a model that does not generate: one forward "
                f"over the prompt)")
    if work.workload == "forward":
        return f"forward pass over {work.prompt} tokens per sequence"
    if work.workload == "vision":
        return f"one image of {work.prompt} patches per item"
    unit = "frames (one 30 s window)" if work.workload == "speech" else "tokens"
    return (f"{work.workload}: encoder input {work.encoder_tokens} {unit}, decoder {work.prompt} start token(s) + "
            f"{work.new_tokens} new tokens")
