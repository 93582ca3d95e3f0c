"""`train MODEL`: memory of one training step per GPU: weights, gradients, optimizer states,
activations, by component at the peak, with what one layer keeps next to Korthikanti et al.'s
formula and the rule of thumb next to it; with --gpu, whether it fits, the largest
micro-batch and the fewest GPUs; with --compare-methods, full fine-tuning, LoRA and QLoRA
side by side."""

from __future__ import annotations

from calculator.core.units import format_count
from calculator.cli.commands._common import (add_command, budget_for, find_gpu, platform_gpus, print_json, readings_lines,
                      render_table, resolve_model, sizer)


# Components as the human output names them.
COMPONENT_NAMES = {"weights": "weights", "master": "float32 master copy", "gradients": "gradients",
                   "optimizer": "optimizer states", "activations": "activations", "buffers": "communication buffers",
                   "temporary": "temporaries"}


# What the loss keeps for the backward, by --loss.
LOSS_KEEPS = {"full": "float32 log-probabilities", "chunked": "float32 log-probabilities, chunk by chunk",
              "fused": "the head's input: no logits"}


def register(commands, shared) -> None:
    from calculator.training import (ACCOUNTINGS, ADAPTER_DTYPES, ATTENTION, CHECKPOINTING, FINE_TUNING_DEFAULTS, LOSSES,
                            METHODS, OPTIMIZER_IMPLS, OPTIMIZERS, PRECISIONS)

    chapter = FINE_TUNING_DEFAULTS  # the fine-tuning chapter's case: the same step on the page and here

    p = add_command(commands, "train", shared, ("model", "trust", "units", "json"), run,
                    help="memory of a training step per GPU: weights, gradients, optimizer, activations")
    p.add_argument("--method", choices=METHODS, default=chapter.method,
                   help=f"full fine-tuning, LoRA or QLoRA (default {chapter.method})")
    p.add_argument("--precision", choices=PRECISIONS, default=chapter.precision,
                   help="mixed: 16-bit weights and gradients, float32 master and states; bfloat16: all 16-bit; "
                        "float32; amp: float32 weights under torch.autocast; bf16-autocast: the Trainer's bf16=True on a "
                        f"16-bit checkpoint, no float32 master copy (default {chapter.precision})")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=chapter.optimizer)
    p.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS, default="fused",
                   help="PyTorch's fused kernel (default), foreach (a temporary per tensor) or for-loop")
    p.add_argument("--batch", type=int, default=chapter.micro_batch,
                   help=f"micro-batch: sequences per GPU per step (default {chapter.micro_batch})")
    p.add_argument("--sequence", type=int, default=chapter.sequence,
                   help=f"tokens per sequence (default {chapter.sequence})")
    p.add_argument("--checkpointing", choices=CHECKPOINTING, default=None,
                   help="activation recomputation (default: full for LoRA and QLoRA, none for full fine-tuning)")
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
    p.add_argument("--adapter-dtype", choices=ADAPTER_DTYPES, default="float32",
                   help="float32: peft's default (autocast_adapter_dtype=True) on a 16-bit model; base: the model's dtype")
    p.add_argument("--no-kbit-prepare", action="store_true",
                   help="QLoRA without peft's prepare_model_for_kbit_training (kept modules stay in 16 bits)")
    p.add_argument("--loss", choices=LOSSES, default=chapter.loss,
                   help="full: transformers' loss over float32 logits, the Trainer's (default); fused: the head and "
                        "the loss in tiles that never build the logits (trl's SFTTrainer from 1.7, Liger's "
                        "use_liger_kernel; refused with a LoRA adapter on the head, as trl refuses it); chunked: torchtune's CEWithChunkedOutputLoss (8 chunks)")
    p.add_argument("--compare-methods", action="store_true",
                   help="full fine-tuning, LoRA and QLoRA side by side, with everything else as given")


def run(args) -> int:

    from calculator.core.budget import readings_of
    from calculator.training import (Layout, TrainingSetup, activation_model, compare_methods,
                            korthikanti_layer_bytes, rule_of_thumb_split,
                            training_memory)

    from calculator.answers.verdicts import default_checkpointing, largest_micro_batch_answer

    card = find_gpu(args.gpu)
    args.gpus = platform_gpus(args, 1)
    checkpointing = args.checkpointing or default_checkpointing(args.method)
    setup = TrainingSetup(method=args.method, precision=args.precision, optimizer=args.optimizer,
                          micro_batch=args.batch, sequence=args.sequence, checkpointing=checkpointing,
                          attention=args.attention, gradient_accumulation=args.accumulation,
                          lora_rank=args.lora_rank, lora_targets=args.lora_targets, optimizer_impl=args.optimizer_impl,
                          adapter_dtype=args.adapter_dtype, kbit_prepare=not args.no_kbit_prepare,
                          loss=args.loss)
    layout = Layout(gpus=args.gpus, tensor=args.tensor, pipeline=args.pipeline, zero=args.zero,
                    offload_optimizer=args.offload_optimizer, offload_parameters=args.offload_params,
                    accounting=args.accounting)
    model = resolve_model(args)
    traits = model.traits
    from calculator.answers.training_json import fewest_json, methods_json, train_json

    answer = largest_micro_batch_answer(model, card, setup, layout) if card is not None else None
    result = train_json(model, card, setup, layout, answer)
    memory = answer.detail if answer is not None else training_memory(model.summary, model.spec, setup, layout, traits)
    layer = activation_model(model.summary, model.spec, traits, setup, layout.tensor, layout.sequence_parallel)
    korthikanti = korthikanti_layer_bytes(setup.micro_batch, setup.sequence, model.spec.hidden, model.spec.heads)
    budget = budget_for(card)
    readings = readings_of(memory, budget)
    if card is not None:
        result.update(fewest_json(model, card, setup))
    result.update({
        "peak_components": memory.peak_components(),
        "rule_of_thumb_split": rule_of_thumb_split(model.summary.parameters),
        # one layer, one micro-batch, this GPU's share (tensor parallelism)
        "layer_activation_groups": layer.layer_groups(),
        "layer_tensors_bytes": layer.layer_tensors_bytes,
        "loss_saved_bytes": layer.loss_saved,
        "loss_held_bytes": layer.loss_held,
        "korthikanti_layer": {"linear_bytes": korthikanti.linear_bytes, "scores_bytes": korthikanti.scores_bytes,
                              "total_bytes": korthikanti.total_bytes}})
    if args.compare_methods:
        methods = compare_methods(model.summary, model.spec, setup, layout, traits,
                                  capacity=budget)
        result.update(methods_json(methods))
    if args.json:
        print_json(result)
        return 0
    size, units = sizer(args.units)
    print(f"Model: {model.name} ({model.source}), {format_count(model.summary.parameters)} parameters, "
          f"{format_count(memory.trainable_parameters)} trained")
    print(f"Setup: {args.method}, {args.precision}, {args.optimizer}, micro-batch {args.batch} x {args.sequence} "
          f"tokens, checkpointing {checkpointing}, loss {args.loss}")
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
    if result["kbit_upcast_expert_bytes"]:
        print(f"Mixture of experts: bitsandbytes leaves the fused experts in 16 bits and "
              f"prepare_model_for_kbit_training casts them to float32, {size(result['kbit_upcast_expert_bytes'])} "
              "more (counted above); --no-kbit-prepare prices the run that skips it.")
    print(f"Rule of thumb (8 bytes per parameter, bfloat16 full fine-tuning): {size(result['rule_of_thumb_bytes'])}.")
    def listing(sizes: dict[str, int], names: dict[str, str] | None = None) -> str:
        return ", ".join(f"{(names or {}).get(key, key)} {size(value)}" for key, value in sizes.items())

    print(f"Rule of thumb by component: {listing(result['rule_of_thumb_split'], COMPONENT_NAMES)}.")
    print(f"At the peak, the master copy apart: {listing(result['peak_components'], COMPONENT_NAMES)}.")
    groups = {group: value for group, value in result["layer_activation_groups"].items() if value}
    print(f"One layer keeps {size(layer.layer_tensors_bytes)} per micro-batch ({listing(groups)}); "
          f"the loss keeps {size(layer.loss_saved)} ({LOSS_KEEPS[args.loss]}) and holds {size(layer.loss_held)} "
          "at the start of the backward.")
    print("Korthikanti et al. (2022, eq. 1), a GPT layer in 16 bits: "
          f"34sbh + 5as^2b = {size(korthikanti.total_bytes)}, 34sbh = {size(korthikanti.linear_bytes)}.")
    for line in readings_lines(readings, card, size):
        print(line)
    if card is not None:
        print(f"Largest micro-batch: {result['largest_micro_batch']} (tight: {result['largest_micro_batch_tight']}).")
        counts = [[c["strategy"], str(c["gpus"]) if c["gpus"] else "more than 4096"] for c in result["fewest_gpus"]]
        print(render_table(["strategy", "fewest GPUs"], counts))
    if args.compare_methods:
        headers = ["method", "trained parameters", "weights", "activations", "peak per GPU"]
        rows = [[method, format_count(row["trainable_parameters"]), size(row["weights_bytes"]),
                 size(row["activations_bytes"]), size(row["total_bytes"])] for method, row in result["methods"].items()]
        if card is not None:
            headers.append("largest micro-batch")
            for row, compared in zip(rows, result["methods"].values()):
                row.append(str(compared["largest_micro_batch"]))
        print(render_table(headers, rows))
    print(units)
    return 0
