"""Evidence and its comparison, written in a reader's language: the figure rows and the
sentences (findings, advice) the CLI and the page show. Text comes from the UI catalogs
(content/ui/<lang>/evidence.toml); this module only fills in the figures, in the language's
units. Strings read from the paste (accelerate's model name) are passed through `quote`, which
the page sets to its Markdown escaper."""

from __future__ import annotations

from collections.abc import Callable

from calculator.core.errors import CalculatorError
from calculator.answers.evidence import Evidence
from calculator.answers.evidence_compare import Comparison, Finding
from calculator.core.messages import text
from calculator.core.units import format_bytes, format_count, format_number

# Scalar figures shown in the table, in this order, for each kind (lists are told as findings).
FIGURES = {
    "vllm-log": ("weights_bytes", "available_kv_bytes", "total_gpu_bytes", "kv_blocks", "block_tokens", "kv_tokens",
                 "max_model_len", "max_concurrency", "cuda_graph_bytes", "gpu_memory_utilization", "tensor_parallel",
                 "kv_cache_dtype", "engine_version"),
    "sglang-log": ("free_before_weights_bytes", "weights_bytes", "kv_tokens", "kv_cache_bytes", "max_model_len",
                   "max_concurrency", "max_running_requests", "cuda_graph_bytes", "free_after_start_bytes",
                   "mem_fraction_static", "tensor_parallel"),
    "nvidia-smi": ("driver_version", "cuda_version"),
    "accelerate-estimate": ("model",),
    "memory-summary": ("device", "allocated_current_bytes", "allocated_peak_bytes", "reserved_current_bytes",
                       "reserved_peak_bytes", "active_peak_bytes", "non_releasable_peak_bytes", "cuda_ooms",
                       "malloc_retries"),
    "oom-message": ("device", "requested", "total", "free", "allocated", "reserved", "reserved_unallocated",
                    "outside_pytorch", "process_in_use", "other_processes", "private_pools"),
}
_OOM_SIZES = {"requested", "total", "free", "allocated", "reserved", "reserved_unallocated", "outside_pytorch",
              "process_in_use", "other_processes", "private_pools"}
_DECIMALS = {"max_concurrency": 2, "concurrency": 2}


def shown(key: str, value: object, lang: str, quote: Callable[[str], str] = str) -> str:
    """One figure as the reader's language writes it."""
    if value is None:
        return "—"
    if isinstance(value, CalculatorError):
        return quote(value.message(lang))
    if isinstance(value, bool):
        return str(value)
    if key.endswith("_bytes") or key in _OOM_SIZES:
        return format_bytes(value, lang)
    if isinstance(value, float):
        if key in _DECIMALS:
            return format_number(value, _DECIMALS[key], lang)
        return f"{value:g}".replace(".", ",") if lang == "fr" else f"{value:g}"
    if isinstance(value, int):
        return str(value) if key in ("index", "pid", "device", "tensor", "tensor_parallel") else format_count(value, lang)
    return str(value) if key in _OURS else quote(str(value))


_OURS = {"share_key", "dtype", "kind_cache_dtype"}  # names the calculator chose, shown in code spans


def kind_name(kind: str, lang: str) -> str:
    return text(f"evidence.kind_{kind.replace('-', '_')}", lang)


def figure_rows(evidence: Evidence, lang: str, quote: Callable[[str], str] = str) -> list[tuple[str, str]]:
    """(label, value) for the figures the evidence gives, in the table's order."""
    rows = []
    for key in FIGURES[evidence.kind]:
        value = evidence.figures.get(key)
        if value is not None and value != "":
            rows.append((text(f"evidence.figure_{key}", lang), shown(key, value, lang, quote)))
    if evidence.kind == "accelerate-estimate":
        for row in evidence.figures.get("rows", []):
            rows.append((text("evidence.figure_accelerate_row", lang, dtype=row["dtype"]),
                         shown("total_bytes", row["total_bytes"], lang)))
    return rows


def sentence(finding: Finding, lang: str, quote: Callable[[str], str] = str) -> str:
    params = {key: shown(key, value, lang, quote) for key, value in finding.params.items()}
    return text(f"evidence.{finding.code}", lang, **params)


def cause_sentences(evidence: Evidence, lang: str) -> list[str]:
    """An out-of-memory message's causes, in the words of the message reader's catalog."""
    return [text(f"oom_message.cause_{cause['code']}", lang,
                 **{k: format_bytes(v, lang) for k, v in cause.items() if k != "code"})
            for cause in evidence.causes]


def lines(evidence: Evidence, comparison: Comparison, lang: str,
          quote: Callable[[str], str] = str) -> tuple[list[str], list[str]]:
    """(what the comparison found, what to do), as sentences."""
    found = [sentence(f, lang, quote) for f in comparison.findings]
    advice = [sentence(f, lang, quote) for f in comparison.advice if f.code != "do_oom_causes"]
    if any(f.code == "do_oom_causes" for f in comparison.advice):
        advice = cause_sentences(evidence, lang) + advice
    return found, advice
