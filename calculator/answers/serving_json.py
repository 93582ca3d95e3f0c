"""`serve --json`, built once for the command and for the serving calculators (memory, GPUs,
concurrency, settings), so each page's "Copy as answer" writes the command's own figures."""

from __future__ import annotations


def serve_json(model, plan) -> dict:
    """The model as the command names it, then the engine's plan (serving_plan.serve); with no
    precision asked on a checkpoint the engine cannot run here as it ships, that format and why
    (`shipped_format`, `shipped_refusal`: the engine's refusal, in English); with none asked
    and vLLM falling back from the checkpoint's dtype on this card, `dtype_fallback`."""
    data = {"model": model.name, "source": model.source, "max_positions": model.spec.max_positions, **plan.to_json()}
    if plan.dtype_source == "shipped_not_run":
        from calculator.core.gpus import gpu
        from calculator.serving.weights import shipped_refusal

        refused = shipped_refusal(model, gpu(plan.gpu), plan.engine, plan.engine_version)
        if refused is not None:
            data["shipped_format"], data["shipped_refusal"] = refused[0], refused[1].message("en")
    fallback = dtype_fallback_of(model, plan)
    if fallback is not None:
        data["dtype_fallback"] = fallback
    return data


def dtype_fallback_of(model, plan) -> dict | None:
    """With no precision asked (the plan's precision is then default_weights', which is
    auto_dtype's), serving.weights.dtype_fallback on the plan's card and engine."""
    if plan.dtype_source not in ("default", "shipped_not_run"):
        return None
    from calculator.core.gpus import gpu
    from calculator.serving.weights import dtype_fallback

    return dtype_fallback(model, gpu(plan.gpu), plan.engine)
