"""One function per question a page or a command answers, each returning the figures, the
verdict and what it assumed (an Answer). CLI commands and widgets format what these return and
compare no byte counts themselves (tests/test_parity.py and tests/test_no_byte_comparisons.py).

The only thing a verdict compares against is a card's budget (budget.Budget: the memory the
process gets, less a stated headroom): "fits" below it, "tight" inside the headroom,
"too_big" above the usable memory. Card-dependent defaults (the precision a card computes in,
the checkpointing a fine-tuning method starts with) are chosen here, once.

Assumption ids are stable (JSON `assumptions`, docs/cli.md "Verdicts"):
- weights_only: only the weights are counted (no activations, no cache).
- weights_held: weights live from start to end, so nothing comes and goes: reserved = allocated.
- context_all_prompt: a context of T tokens arrives whole as a prompt (the next turn of a
  conversation sends the whole history): the worst case of a generation of that length.
- lengths: the tokens a sequence holds (value: prompt, new tokens).
- forward_only: a model that does not generate runs one forward over its tokens.
- compute_dtype: the precision the products run in (value: dtype, and why when the engine chose).
- batch_capped: the batch a throughput answer uses is the largest that fits, capped (value: cap).
- span: the longest context searched (the model's own positions, else DEFAULT_SPAN).
- checkpointing, precision: the activation recomputation and the precision a training step uses
  (recomputation: full for LoRA and QLoRA, none for full fine-tuning, unless given).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from calculator.core.budget import FITS, TIGHT, TOO_BIG, Budget, readings_of, reserved_bytes
from calculator.core.gpus import Gpu

VERDICT_ORDER = (FITS, TIGHT, TOO_BIG)
MAX_THROUGHPUT_BATCH = 256  # data-parallel timing: larger batches add little throughput
DEFAULT_SPAN = 32_768  # the longest context searched for a model that does not say how long a context it takes


@dataclass(frozen=True)
class Assumption:
    """What an answer took for granted: a stable id and its value (None when the id says it all)."""

    id: str
    value: object = None

    def to_json(self) -> dict:
        return {"id": self.id, "value": self.value}


@dataclass(frozen=True)
class Answer:
    """One question's answer: its figures, its verdict (None where the question has none) and
    what it assumed. `detail` carries the engine result the figures come from, for display."""

    question: str
    verdict: str | None
    figures: dict = field(default_factory=dict)
    assumptions: tuple[Assumption, ...] = ()
    detail: object = None

    def assumed(self, key: str):
        """The value of assumption `key` (KeyError when the answer did not make it)."""
        for assumption in self.assumptions:
            if assumption.id == key:
                return assumption.value
        raise KeyError(key)

    def to_json(self) -> dict:
        return {"verdict": self.verdict, **self.figures,
                "assumptions": [assumption.to_json() for assumption in self.assumptions]}


def worst(verdicts) -> str:
    """The worst of several verdicts (a plan fits only where every GPU does)."""
    return max(verdicts, key=VERDICT_ORDER.index, default=FITS)


# Precision and other card- or method-dependent defaults -----------------------------------

NO_BF16_TENSOR_CORES = "no_bf16_tensor_cores"  # compute_dtype's reason when the card turned bfloat16 into float16


def card_chose_float16(compute: dict | None) -> bool:
    """Whether a compute_dtype assumption's value (compute_dtype_for) says the card turned
    bfloat16 into float16, so the answer says so."""
    return bool(compute) and compute.get("reason") == NO_BF16_TENSOR_CORES


def float16_assumed(assumptions: list[dict]) -> bool:
    """The same, read from an answer's JSON list of assumptions."""
    return any(a["id"] == "compute_dtype" and card_chose_float16(a["value"]) for a in assumptions)


def compute_dtype_for(card: Gpu, dtype: str = "bfloat16") -> tuple[str, Assumption]:
    """The precision a run computes in on this card: bfloat16 becomes float16 on a card
    without bfloat16 tensor cores (Turing and older: a T4 would run bfloat16 products at the
    float32 rate, and everyone runs float16 there)."""
    if dtype == "bfloat16" and not card.has_bf16_tensor_cores:
        return "float16", Assumption("compute_dtype", {"dtype": "float16", "reason": NO_BF16_TENSOR_CORES,
                                                      "gpu": card.key})
    return dtype, Assumption("compute_dtype", {"dtype": dtype, "reason": "given"})


def card_dtype(card: Gpu | None, asked: str | None) -> tuple[str, Assumption | None]:
    """The precision a command prices: the one asked for; none asked, the one the card computes
    in (compute_dtype_for: float16 on a T4, V100 or P100; bfloat16 without a card), with the
    assumption saying so. `speed` and `inference` both start here."""
    if asked is not None:
        return asked, None
    if card is None:
        return "bfloat16", None
    return compute_dtype_for(card)


def default_checkpointing(method: str) -> str:
    """Activation recomputation a fine-tuning method starts with: LoRA and QLoRA recipes
    (peft's, the QLoRA paper's) turn it on; full fine-tuning starts without it."""
    return "none" if method == "full" else "full"


# Weights per GPU: tensor and pipeline parallelism ----------------------------------------

def weights_per_gpu(per_gpu_bytes, card: Gpu | None, question: str = "weights_fit",
                    assumptions: tuple[Assumption, ...] = (Assumption("weights_only"), Assumption("weights_held"))
                    ) -> Answer:
    """Whether each GPU's weights (or other states held from start to end) fit: each GPU's
    reserved bytes against the card's budget; the plan's verdict is its worst GPU's."""
    per_gpu = [int(b) for b in per_gpu_bytes]
    figures = {"weights_per_gpu_bytes": per_gpu, "largest_bytes": max(per_gpu, default=0)}
    if card is None:
        return Answer(question, None, figures, assumptions)
    budget = Budget(card)
    reserved = [reserved_bytes(b, b) for b in per_gpu]
    verdicts = [budget.verdict_for(r) for r in reserved]
    figures.update(per_gpu_verdicts=verdicts, usable_bytes=budget.usable_bytes, headroom_bytes=budget.headroom_bytes,
                   largest_reserved_bytes=max(reserved, default=0))
    return Answer(question, worst(verdicts), figures, assumptions)


def tensor_parallel_answer(model, card: Gpu, dtype: str, degree: int, tokens: int) -> Answer:
    """Tensor parallelism of `degree`: every GPU's weights against the card's budget."""
    from calculator.distributed.parallel import tensor_parallel
    from calculator.memory.quantization import storage_dtype

    result = tensor_parallel(model.summary, model.spec, storage_dtype(dtype), degree, tokens)
    answer = weights_per_gpu([result.per_gpu_bytes], card, "tensor_parallel_fit")
    return replace(answer, detail=result, assumptions=answer.assumptions + (Assumption("dtype", result.dtype),))


def pipeline_answer(model, card: Gpu | None, dtype: str, gpus: int) -> Answer:
    """A pipeline split over `gpus` stages: each stage's weights against the card's budget."""
    from calculator.distributed.parallel import pipeline_split
    from calculator.memory.quantization import storage_dtype

    storage = storage_dtype(dtype)
    stages = pipeline_split(model.summary, storage, gpus)
    answer = weights_per_gpu([s.bytes for s in stages], card, "pipeline_fit")
    return replace(answer, detail=stages, assumptions=answer.assumptions + (Assumption("dtype", storage),))


def zero_offload_answer(result, card: Gpu) -> Answer:
    """Model states per GPU without and with ZeRO-Offload (before activations) against the budget."""
    return weights_per_gpu([result.gpu_plain_bytes, result.gpu_offload_bytes], card, "zero_offload_fit",
                           (Assumption("states_only"), Assumption("weights_held")))


def offload_limits(card: Gpu, gpu_budget_bytes: int, disk_bytes: int = 0, disk_budget_bytes: int | None = None
                   ) -> Answer:
    """What a device map's limits say: a GPU budget above the card's total (the planner would
    place more than the card holds), and a disk limit the offloaded weights (`disk_bytes`)
    do not fit in."""
    over_card = gpu_budget_bytes > card.memory_bytes
    disk_short = disk_budget_bytes is not None and disk_bytes > disk_budget_bytes
    figures = {"gpu_budget_over_card": over_card, "disk_too_small": disk_short, "gpu_budget_bytes": gpu_budget_bytes,
               "disk_budget_bytes": disk_budget_bytes, "disk_bytes": disk_bytes}
    return Answer("offload_limits", TOO_BIG if disk_short else None, figures)


def load_answer(model, card: Gpu, dtype: str) -> Answer:
    """Whether the model loads on the card (estimate.fit_verdict: the x1.1 rule below the
    budget fits, the bare weights inside the usable memory are tight); `detail`: the three
    readings of the loaded weights."""
    from calculator.memory.estimate import fit_verdict, load_readings, rows_for, weight_rounding

    summary, budget = model.summary, Budget(card)
    row = rows_for(summary, (dtype,), model.spec)[0]  # a dtype, or a format's real layout
    exact, rule = row.total_bytes, row.rule_of_thumb_bytes
    verdict = fit_verdict(exact, rule, budget, weight_rounding(summary, dtype, model.spec))
    figures = {"total_bytes": exact, "rule_of_thumb_bytes": rule, "usable_bytes": budget.usable_bytes,
               "headroom_bytes": budget.headroom_bytes, "dtype": row.dtype,
               "bytes_per_param": row.bytes_per_param}  # a format's: its bytes with scales, averaged
    return Answer("load_fit", verdict, figures, (Assumption("weights_only"), Assumption("dtype", row.dtype)),
                  load_readings(summary, row.dtype, budget, model.spec))


# Inference: largest batch, largest context, formats that fit ------------------------------

def lengths_for(spec, prompt: int, new_tokens: int) -> tuple[dict, Assumption]:
    """The lengths a sequence runs with: prompt and answer for a model that generates, one
    forward over `prompt` tokens for one that does not."""
    from calculator.memory.inference import can_generate

    if can_generate(spec):
        return {"prompt": prompt, "new_tokens": new_tokens}, Assumption("lengths", {"prompt": prompt,
                                                                                    "new_tokens": new_tokens})
    return {"context": prompt}, Assumption("forward_only", {"tokens": prompt})


def largest_batch_answer(model, card: Gpu, lengths: dict, **options) -> Answer:
    """The largest batch whose reserved peak fits the card's budget, and the one only the
    headroom admits; `lengths`: context=T, or prompt=P and new_tokens=N."""
    from calculator.memory.inference import inference_memory, largest_batch

    budget = Budget(card)
    largest = largest_batch(model.summary, model.spec, budget, **lengths, **options)
    tight = largest_batch(model.summary, model.spec, replace(budget, headroom_share=0.0), **lengths, **options)
    one = inference_memory(model.summary, model.spec, 1, **lengths, **options)
    verdict = readings_of(one, budget).verdict
    figures = {"largest_batch": largest, "largest_batch_tight": tight, "usable_bytes": budget.usable_bytes,
               "headroom_bytes": budget.headroom_bytes, "dtype": one.weights_format}
    return Answer("largest_batch", verdict, figures, (Assumption("lengths", dict(lengths)),))


def context_span(spec) -> int:
    """How far a largest-context search goes: the model's positions, else DEFAULT_SPAN."""
    return spec.max_positions or DEFAULT_SPAN


def largest_context_answer(model, card: Gpu, batch: int, work=None, **options) -> Answer:
    """The longest context that fits at this batch, all of it arriving as a prompt (the worst
    case of a generation that long: the next turn of a conversation sends the whole history),
    searched up to the model's positions (context_span). With `work` (workloads.Shape) other
    than generation, the length the workload varies: a forward pass's sequence, a seq2seq
    encoder's input with the answer kept; speech and vision items all have one length (the
    30 s window, the image's patches): the answer is that length when it fits, else 0."""
    from calculator.memory.inference import inference_memory, largest_context

    if work is not None and work.workload != "generation":
        return _workload_context_answer(model, card, batch, work, options)
    options = {k: v for k, v in options.items() if k not in ("prompt", "new_tokens", "context")}
    limit = context_span(model.spec)
    budget = Budget(card)
    largest = largest_context(model.summary, model.spec, budget, batch, limit=limit, **options)
    tight = largest_context(model.summary, model.spec, replace(budget, headroom_share=0.0), batch, limit=limit,
                            **options)
    one = inference_memory(model.summary, model.spec, batch, 1, **options)
    figures = {"largest_context": largest, "largest_context_tight": tight, "batch": batch, "span": limit,
               "usable_bytes": budget.usable_bytes, "dtype": one.weights_format}
    return Answer("largest_context", readings_of(one, budget).verdict, figures,
                  (Assumption("context_all_prompt"), Assumption("span", limit)))


def _workload_context_answer(model, card: Gpu, batch: int, work, options: dict) -> Answer:
    """largest_context_answer for a workload other than generation (workloads.lengths_at)."""
    from calculator.memory.inference import inference_memory
    from calculator.core.search import largest_fitting
    from calculator.memory.workloads import length_of, lengths_at, varies

    options = {k: v for k, v in options.items() if k not in ("prompt", "new_tokens", "context", "mode", "encoder_tokens")}
    budget = Budget(card)

    def memory_at(length: int):
        return inference_memory(model.summary, model.spec, batch, **lengths_at(work, length), **options)

    if varies(work):
        limit = context_span(model.spec)
        largest = largest_fitting(budget, memory_at, limit)
        tight = largest_fitting(replace(budget, headroom_share=0.0), memory_at, limit)
        shortest = memory_at(1)
    else:
        limit = length_of(work)
        shortest = memory_at(limit)
        largest = limit if readings_of(shortest, budget).verdict == FITS else 0
        tight = limit if readings_of(shortest, budget).verdict != TOO_BIG else 0
    figures = {"largest_context": largest, "largest_context_tight": tight, "batch": batch, "span": limit,
               "usable_bytes": budget.usable_bytes, "dtype": shortest.weights_format, "workload": work.workload,
               "varies": varies(work)}
    return Answer("largest_context", readings_of(shortest, budget).verdict, figures,
                  (work_assumption(work), Assumption("span", limit)))


def work_assumption(work) -> Assumption:
    """The lengths a workload's run assumed: a generation's (or an encoder-decoder's) prompt,
    answer and encoder input, or the tokens of one forward pass."""
    if work.generates:
        return Assumption("lengths", {k: v for k, v in work.memory_lengths.items() if k != "mode"})
    return Assumption("forward_only", {"tokens": work.prompt})


def largest_micro_batch_answer(model, card: Gpu, setup, layout=None) -> Answer:
    """The peak of one training step per GPU against the card's budget, and the largest
    micro-batch that fits (and the one only the headroom admits); `detail`: the step's memory."""
    from calculator.training import Layout, largest_micro_batch, training_memory

    layout = layout or Layout()
    budget = Budget(card)
    memory = training_memory(model.summary, model.spec, setup, layout, model.traits)
    largest = largest_micro_batch(model.summary, model.spec, budget, setup, layout, model.traits)
    tight = largest_micro_batch(model.summary, model.spec, replace(budget, headroom_share=0.0), setup, layout,
                                model.traits)
    figures = {"largest_micro_batch": largest, "largest_micro_batch_tight": tight, "precision": setup.precision,
               "usable_bytes": budget.usable_bytes, "headroom_bytes": budget.headroom_bytes}
    assumptions = (Assumption("checkpointing", setup.checkpointing), Assumption("precision", setup.precision))
    return Answer("largest_micro_batch", readings_of(memory, budget).verdict, figures, assumptions, memory)


def formats_answer(model, card: Gpu, batch: int, prompt: int, new_tokens: int, group_size: int,
                   formats=None, work=None) -> Answer:
    """Each quantization format's weights and inference peak for this run, its verdict on the
    card, and the formats that fit (`detail`: the quantized models, in order). With `work`
    (workloads.Shape), the workload's lengths instead of prompt and new tokens."""
    from calculator.memory.inference import inference_memory
    from calculator.memory.quantization import FORMATS, quantize_all

    results = quantize_all(model.summary, model.spec, group_size, FORMATS if formats is None else formats)
    if work is None:
        lengths, assumed = lengths_for(model.spec, prompt, new_tokens)
    else:
        lengths, assumed = dict(work.memory_lengths), work_assumption(work)
    budget = Budget(card)
    rows = []
    for r in results:
        peak = inference_memory(model.summary, model.spec, batch, dtype=r.format if r.family != "bf16" else "bfloat16",
                                group_size=group_size, **lengths)
        readings = readings_of(peak, budget)
        rows.append({"format": r.format, "peak_bytes": peak.total_bytes, "reserved_bytes": readings.reserved_bytes,
                     "verdict": readings.verdict, "context": peak.context})
    fitting = [row["format"] for row in rows if row["verdict"] == FITS]
    tight = [row["format"] for row in rows if row["verdict"] == TIGHT]
    verdict = FITS if fitting else (TIGHT if tight else TOO_BIG)
    figures = {"formats": rows, "fitting": fitting, "tight": tight, "batch": batch,
               "usable_bytes": budget.usable_bytes, "headroom_bytes": budget.headroom_bytes}
    return Answer("formats_fit", verdict, figures, (assumed, Assumption("group_size", group_size)), tuple(results))


# Time: tokens per second, samples on k GPUs -----------------------------------------------

def speed_answer(model, card: Gpu, dtype: str, work, batches) -> Answer:
    """Per batch size: the peak, its verdict, and the roofline speed of the workload `work`
    (calculator/memory/workloads.shape: tokens per second for generation, items per second for the
    others, audio hours per hour for speech); with the largest batch that fits. The same
    lengths and budget as the inference answers."""
    from calculator.memory.inference import inference_memory
    from calculator.memory.workload_speed import workload_speed

    lengths = work.memory_lengths
    budget = Budget(card)
    largest = largest_batch_answer(model, card, lengths, dtype=dtype)
    rows = []
    for b in batches:
        memory = inference_memory(model.summary, model.spec, b, dtype=dtype, **lengths)
        speed = workload_speed(model.summary, model.spec, card, dtype, b, work)
        rows.append({"dtype": dtype, "batch": b, "memory_bytes": memory.total_bytes,
                     "verdict": readings_of(memory, budget).verdict, **_speed_row(speed)})
    figures = {"dtype": dtype, "workload": work.workload, "largest_batch": largest.figures["largest_batch"],
               "rows": rows}
    return Answer("speed", largest.verdict, figures, (work_assumption(work),))


def _speed_row(speed) -> dict:
    """A workload's speed in its own unit: time to first token and per token for what
    generates, one forward's time for the others; items per second for every workload."""
    row = {"items_per_second": speed.items_per_second, "seconds_per_batch": speed.seconds_per_batch}
    # the generation keys stay in every row (a forward pass: its time first, no tokens generated)
    row.update(time_to_first_token_s=speed.time_to_first_token, time_per_token_s=speed.time_per_token,
               tokens_per_second=speed.tokens_per_second, decode_bound=speed.bound)
    if speed.workload in ("forward", "vision"):
        row.update(sequences_per_second=speed.items_per_second, forward_s=speed.seconds_per_batch, bound=speed.bound)
    if speed.workload == "speech":
        row["audio_hours_per_hour"] = speed.audio_hours_per_hour
    return row


def data_parallel_answer(model, card: Gpu, samples: int, tokens: int, gpus_per_node: int, nodes: int,
                         network: str, training: bool, dtype: str = "bfloat16", counts=(), work=None) -> Answer:
    """The time to process `samples` samples of `tokens` tokens on one GPU and on
    gpus_per_node x nodes GPUs (and on each of `counts` GPUs, for a chart). Inference runs the
    largest batch that fits (capped), in the precision the card computes in; `work` (a
    workloads.Shape other than generation: a forward pass, an encoder-decoder's answer, a 30 s
    window, an image) divides the items over the GPUs, with no communication."""
    from calculator.memory.inference import can_generate
    from calculator.memory.speed import data_parallel_inference, data_parallel_training, generation

    dtype, precision = compute_dtype_for(card, dtype)
    gpus = gpus_per_node * nodes
    assumptions = [precision]
    if training:
        def seconds_on(per_node: int, node_count: int) -> float:
            return data_parallel_training(model.summary, card, samples, tokens, per_node, node_count, network,
                                          dtype=dtype).seconds

        total = data_parallel_training(model.summary, card, samples, tokens, gpus_per_node, nodes, network,
                                       dtype=dtype)
        single, final = seconds_on(1, 1), total.seconds
        by_count = {k: seconds_on(min(k, gpus_per_node), max(k // gpus_per_node, 1)) for k in counts}
        figures = {"compute_seconds": total.compute_seconds, "communication_seconds": total.communication_seconds,
                   "steps": total.steps}
    elif work is not None and work.workload != "generation":
        from calculator.memory.workload_speed import workload_speed

        largest = largest_batch_answer(model, card, work.memory_lengths, dtype=dtype)
        batch = max(1, min(largest.figures["largest_batch"], MAX_THROUGHPUT_BATCH))
        run = workload_speed(model.summary, model.spec, card, dtype, batch, work)

        def seconds_on(k: int) -> float:
            return run.seconds_for(math.ceil(samples / k))

        single, final = seconds_on(1), seconds_on(gpus)
        by_count = {k: seconds_on(k) for k in counts}
        figures = {"batch": batch, "workload": work.workload}
        assumptions.append(Assumption("batch_capped", MAX_THROUGHPUT_BATCH))
    else:
        lengths = {} if can_generate(model.spec) else {"mode": "forward"}
        largest = largest_batch_answer(model, card, {"context": tokens}, dtype=dtype, **lengths)
        batch = max(1, min(largest.figures["largest_batch"], MAX_THROUGHPUT_BATCH))
        run = generation(model.summary, model.spec, card, dtype, batch, tokens, 1)
        single, final = data_parallel_inference(run, samples, 1), data_parallel_inference(run, samples, gpus)
        by_count = {k: data_parallel_inference(run, samples, k) for k in counts}
        figures = {"batch": batch}
        assumptions.append(Assumption("batch_capped", MAX_THROUGHPUT_BATCH))
    figures = {"dtype": dtype, "training": training, "gpus": gpus, "nodes": nodes, "one_gpu_seconds": single,
               "seconds": final, "speedup": single / final, "seconds_by_gpus": by_count, **figures}
    return Answer("data_parallel_time", None, figures, tuple(assumptions))


# The JSON forms of a reading and of an answer, shared by the commands and the pages' answers

def readings_json(readings) -> dict:
    """The three readings and, with a card, the usable memory, the headroom and the verdict."""
    data = {"reserved_bytes": readings.reserved_bytes, "nvidia_smi_bytes": readings.nvidia_smi_bytes}
    if readings.verdict is not None:
        data.update(usable_bytes=readings.usable_bytes, headroom_bytes=readings.headroom_bytes,
                    verdict=readings.verdict, fits=readings.verdict == "fits")
    return data


def verdict_json(answer) -> dict:
    """An answer's verdict as JSON: `verdict`, `fits` (true only for "fits"; null without a
    card), its figures and `assumptions` (stable ids, docs/cli.md "Verdicts")."""
    data = answer.to_json()
    data["fits"] = None if answer.verdict is None else answer.verdict == "fits"
    return data
