"""`serve --json`, built once for the command and for the serving calculators (memory, GPUs,
concurrency, settings), so each page's "Copy as answer" writes the command's own figures."""

from __future__ import annotations


def serve_json(model, plan) -> dict:
    """The model as the command names it, then the engine's plan (serving_plan.serve)."""
    return {"model": model.name, "source": model.source, "max_positions": model.spec.max_positions, **plan.to_json()}
