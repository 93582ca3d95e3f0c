"""Evidence and its comparison, written in a reader's language: the figure rows and the
sentences (findings, advice) the CLI and the page show. Text comes from the UI catalogs
(content/ui/<lang>/evidence.toml); this module only fills in the figures, in the language's
units. Strings read from the paste (accelerate's model name) are passed through `quote`, which
the page sets to its Markdown escaper."""

from __future__ import annotations

from collections.abc import Callable
import re

from calculator.core.errors import CalculatorError
from calculator.answers.answer import section_link
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


# The guide section that explains each kind (a support answer links there).
SECTIONS = {"oom-message": ("oom", "oom-message"), "nvidia-smi": ("oom", "find-memory"),
            "memory-summary": ("oom", "find-memory"), "accelerate-estimate": ("memory-estimate", "units"),
            "vllm-log": ("serving", "engine-settings"), "sglang-log": ("serving", "engine-settings")}


def section_of(kind: str) -> tuple[str, str]:
    return SECTIONS.get(kind, ("serving", "engine-settings"))


# The case options of `read`, in the order its command line writes them, and their defaults.
READ_CASE = (("model", "--model"), ("gpu", "--gpu"), ("dtype", "--dtype"), ("context", "--context"),
             ("tensor", "--tensor"), ("engine_version", "--engine-version"))
READ_DEFAULTS = {"dtype": "bfloat16"}


def read_command(source: str, case: dict, kind: str | None = None) -> str:
    """`python -m calculator read SOURCE ...` with the case values that are not the defaults: the
    one command line the CLI and the page give to read a text again."""
    import shlex

    words = ["python", "-m", "calculator", "read", source]
    for name, flag in READ_CASE:
        value = case.get(name)
        if value is not None and value != READ_DEFAULTS.get(name):
            words += [flag, str(value)]
    if kind:
        words += ["--kind", kind]
    return " ".join(shlex.quote(word) for word in words)


_GUIDE_LINK = re.compile(r"\]\(([a-z][a-z-]{0,40})#([a-z][a-z-]{0,40})\)")


def _absolute(line: str, lang: str) -> str:
    """A sentence's links to the guide's sections ("[units](memory-estimate#units)") as full
    addresses, so they open from wherever the answer is pasted."""
    return _GUIDE_LINK.sub(lambda m: f"]({section_link(m[1], m[2], (), lang)})", line)


def answer_markdown(evidence: Evidence, comparison: Comparison, lang: str, link: str, command: str) -> str:
    """The reading as an answer to paste, in `lang`: what the text is, its figures, what the
    comparison with the case found, what to do, the section's link and the command that reads
    it again. French answers get the pages' typography (the command is left as it is)."""
    found, advice = lines(evidence, comparison, lang)
    found, advice = [_absolute(line, lang) for line in found], [_absolute(line, lang) for line in advice]
    parts = [text("evidence.md_read_as", lang, kind=kind_name(evidence.kind, lang)), ""]
    parts += [f"- {label}: {value}" if lang == "en" else f"- {label} : {value}"
              for label, value in figure_rows(evidence, lang)]
    parts += [f"- {line}" for line in found]
    if advice:
        parts += ["", f"**{text('answer.what_to_do', lang)}**"] + [f"- {line}" for line in advice]
    parts += ["", f"{text('answer.more', lang)} {link}", "", text("answer.reproduce", lang), "",
              "```bash", command, "```"]
    body = "\n".join(parts) + "\n"
    if lang == "fr":
        from calculator.core.typography import french

        body = french(body)
    return body
