"""A reader's offload plan, made in a build worker: the model built on the meta device from
the reader's config and accelerate's placement (calculator/distributed/offload.py) both run in the worker
(calculator/models/builder.py), within its memory and time limits; only the plain result (the device
map and the bytes per device, a DevicePlan) comes back, and the server keeps those results in
a cache bounded in entries and bytes. No model object ever lives in the server.

The worker keeps the last model it built (one), so that moving a budget slider does not build
the same model again; a worker grown past its bound is replaced, model and all.
"""

from __future__ import annotations

import json

from calculator.models import builder
from calculator.distributed.offload import DevicePlan, build_meta_model, plan_device_map

PLAN_CACHE_ENTRIES = 64
PLAN_CACHE_BYTES = 16 * 2**20

_last_model: tuple[tuple[str, str], object] | None = None  # in a worker: ((config, dtype), model)


def plan_here(config_json: str, gpu_budgets: list[int], cpu_budget: int | None, dtype: str,
              quantization: str) -> tuple[DevicePlan, str]:
    """(plan, the class transformers builds) in this process: what the worker runs."""
    global _last_model
    key = (config_json, dtype)
    if _last_model is None or _last_model[0] != key:
        _last_model = None  # the previous model goes before the next is built
        _last_model = (key, build_meta_model(json.loads(config_json), dtype))
    model = _last_model[1]
    return plan_device_map(model, list(gpu_budgets), cpu_budget, dtype, quantization), type(model).__name__


def plan_config(config_json: str, gpu_budgets: list[int], cpu_budget: int | None, dtype: str = "bfloat16",
                quantization: str = "none") -> tuple[DevicePlan, str]:
    """(plan, architecture) for a config given as JSON, made in a build worker and kept in a
    bounded cache (refusals too: a config past the build limits is not built again)."""
    from calculator.core.errors import CalculatorError
    from calculator.models.seam import _BoundedCache

    global _plans
    if _plans is None:
        _plans = _BoundedCache(PLAN_CACHE_ENTRIES, PLAN_CACHE_BYTES)
    key = (config_json, tuple(gpu_budgets), cpu_budget, dtype, quantization)
    value, error = _plans.get(key, lambda: builder.build({
        "op": "plan_device_map", "config_json": config_json, "gpu_budgets": list(gpu_budgets),
        "cpu_budget": cpu_budget, "dtype": dtype, "quantization": quantization}))
    if error is not None:
        raise CalculatorError(error[0], **error[1])
    return value


_plans = None


def cache_stats() -> tuple[int, int]:
    """(entries, bytes) of plans kept in this process."""
    return _plans.stats() if _plans is not None else (0, 0)
