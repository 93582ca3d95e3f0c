"""`offload --json`, built once for the command and for the CPU-offloading page's device-map
calculator, so the page's "Copy as answer" writes the command's own figures and code."""

from __future__ import annotations


def offload_json(model, card, gpu_budget: int, gpus: int, plan, cost, precision=None) -> dict:
    """The plan, its cost and the loading code (its comments in English, as the command prints it);
    `precision`: the compute_dtype assumption when the card chose the dtype (verdicts.card_dtype)."""
    from calculator.distributed.offload import snippet

    code = snippet(model.load_id or model.name, model.summary.architecture, plan)
    return {"model": model.load_id, "gpu": card.key, "gpu_budget": gpu_budget, "gpus": gpus, **plan.to_json(),
            "cost": cost.to_json(), "snippet": code,
            "assumptions": [precision.to_json()] if precision is not None else []}
