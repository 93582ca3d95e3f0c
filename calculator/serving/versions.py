"""The one table of the engine versions whose accounting `serve` follows: per engine, the
current one (the default) first, then the releases of the published logs the chapter compares
against (bench/data/serving_logs.json)."""

from __future__ import annotations

from calculator.core.errors import CalculatorError
from calculator.serving.sglang import SGLANG_VERSIONS
from calculator.serving.vllm import VLLM_CURRENT

ENGINE_VERSIONS = {"vllm": (VLLM_CURRENT, "0.19"), "sglang": SGLANG_VERSIONS}


def default_version(engine: str) -> str:
    return ENGINE_VERSIONS[engine][0]


def check_version(engine: str, version: str | None) -> str:
    """The version asked for, or the engine's current one; anything else is refused with the
    versions this engine accepts."""
    if version is None:
        return default_version(engine)
    if version not in ENGINE_VERSIONS[engine]:
        raise CalculatorError("unknown_choice", name=f"{engine} version", value=str(version)[:30],
                              choices=", ".join(ENGINE_VERSIONS[engine]))
    return version
