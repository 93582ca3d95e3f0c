"""The core of `inference --json` (one run's memory, its readings and, with a card, the
largest batch and context), built once for the command and for the out-of-memory page, so
the page's "Copy as answer" writes the command's own figures."""

from __future__ import annotations


def inference_json(model, card, batch: int, length: dict, options: dict, workload: str, work=None,
                   precision=None) -> dict:
    """`length`: inference_memory's lengths (context=T, or prompt and new_tokens); `options`:
    its dtype, kv_dtype, attention, mode, cache and bnb_compute_dtype; `work`: the workload's run
    (workloads.Shape) when the largest context varies its own length (verdicts.largest_context_answer);
    `precision`: the compute_dtype assumption when the card chose the precision (verdicts.card_dtype)."""
    from calculator.core.budget import Budget, readings_of
    from calculator.answers.verdicts import readings_json
    from calculator.memory.inference import inference_memory
    from calculator.answers.verdicts import largest_batch_answer, largest_context_answer

    memory = inference_memory(model.summary, model.spec, batch, **length, **options)
    readings = readings_of(memory, Budget(card) if card is not None else None)
    result = {"model": model.name, "source": model.source, "workload": workload, **memory.to_json(),
              **readings_json(readings), "max_positions": model.spec.max_positions}
    if card:
        by_context = {**options, **({"encoder_tokens": length["encoder_tokens"]} if "encoder_tokens" in length else {})}
        largest_batch = largest_batch_answer(model, card, length, **options)
        largest_context = largest_context_answer(model, card, batch, work=work, **by_context)
        result.update(gpu=card.key, gpu_memory_bytes=card.memory_bytes, total_memory_bytes=card.total_bytes,
                      context_bytes=card.context_bytes, largest_batch=largest_batch.figures["largest_batch"],
                      largest_batch_tight=largest_batch.figures["largest_batch_tight"],
                      largest_context=largest_context.figures["largest_context"],
                      largest_context_tight=largest_context.figures["largest_context_tight"],
                      assumptions=[a.to_json() for a in ((precision,) if precision else ())
                                   + largest_batch.assumptions + largest_context.assumptions])
    return result
