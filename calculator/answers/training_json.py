"""The core of `train --json` (the step's memory, the setup, the layout, the readings and,
with a card, the largest micro-batch), built once for the command and for the fine-tuning
page, so the page's "Copy as answer" writes the command's own figures."""

from __future__ import annotations


def train_json(model, card, setup, layout, answer=None) -> dict:
    """`answer`: verdicts.largest_micro_batch_answer on `card` (None without a card); its
    `detail` is the step's memory, computed once."""
    from calculator.core.budget import Budget, readings_of
    from calculator.answers.verdicts import readings_json
    from calculator.training import idle_adapter_parameters, kbit_upcast_bytes, rule_of_thumb_bytes, training_memory
    from calculator.training.peak import tower_parameters

    memory = answer.detail if answer is not None else training_memory(model.summary, model.spec, setup, layout,
                                                                       model.traits)
    result = {"model": model.name, "source": model.source, **memory.to_json(),
              "rule_of_thumb_bytes": rule_of_thumb_bytes(model.summary.parameters),
              "kbit_upcast_expert_bytes": kbit_upcast_bytes(model.summary, model.spec, setup),
              # a vision-language model's image side: a text batch leaves it frozen (priced so)
              "frozen_tower_parameters": tower_parameters(model.summary, model.spec),
              # LoRA adapters peft puts on that image side: weights only (no gradient ever reaches them)
              "idle_adapter_parameters": idle_adapter_parameters(model.summary, model.spec, setup),
              "setup": {k: v for k, v in setup.__dict__.items() if k != "device"},
              "layout": {**layout.__dict__, "data": layout.data}}
    result.update(readings_json(readings_of(memory, Budget(card) if card is not None else None)))
    if card is not None:
        result.update({"gpu": card.key, "gpu_memory_bytes": card.memory_bytes, "total_memory_bytes": card.total_bytes,
                       "context_bytes": card.context_bytes,
                       "largest_micro_batch": answer.figures["largest_micro_batch"],
                       "largest_micro_batch_tight": answer.figures["largest_micro_batch_tight"],
                       "assumptions": [a.to_json() for a in answer.assumptions]})
    return result


def methods_json(methods) -> dict:
    """`train --compare-methods --json`'s "methods": full fine-tuning, LoRA and QLoRA
    (training.compare_methods), for the command and for the LoRA calculator alike."""
    return {"methods": {method: compared.to_json() for method, compared in methods.items()}}


# The strategies' names: technical terms, the same in both languages (ZeRO-3 + offload apart,
# which the fewest count leaves out).
STRATEGY_LABELS = {"ddp": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3",
                   "tensor": "TP", "pipeline": "PP", "tensor-pipeline": "TP × PP"}


def fewest_json(model, card, setup) -> dict:
    """`train --gpu`'s "fewest_gpus": for each strategy, the fewest of these GPUs that hold the step."""
    from calculator.core.budget import Budget
    from calculator.training import STRATEGIES, fewest_gpus

    return {"fewest_gpus": [fewest_gpus(model.summary, model.spec, Budget(card), strategy, setup, model.traits).to_json()
                            for strategy in STRATEGIES]}


def fewest_pick(rows: list[dict]) -> dict:
    """The fewest GPUs without offload (the first strategy in STRATEGIES on a tie), and
    ZeRO-3 + offload's count when it needs fewer still; `rows`: fewest_json's list."""
    from calculator.training import STRATEGIES

    fitting = [(row["gpus"], STRATEGIES.index(row["strategy"]), row["strategy"]) for row in rows
               if row["gpus"] and row["strategy"] != "zero3-offload"]
    offload = next((row["gpus"] for row in rows if row["strategy"] == "zero3-offload"), 0)
    best = min(fitting) if fitting else None
    return {"gpus": best[0] if best else 0, "strategy": best[2] if best else None,
            "offload_gpus": offload if offload and (not best or offload < best[0]) else 0}
