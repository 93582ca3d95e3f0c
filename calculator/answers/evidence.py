"""Evidence readers: what people paste into their questions, read into figures.

Six kinds: an out-of-memory message (read by calculator/memory/oom_message.py), an `nvidia-smi` table
or its `--query-gpu` CSV, a vLLM or SGLang start-up log, `accelerate estimate-memory`'s table
and `torch.cuda.memory_summary()`. `read(text)` recognises the kind and returns its figures
(bytes, tokens); unreadable text is refused with a CalculatorError whose message exists in
each language. The text is bounded (MAX_BYTES) and only ever read by anchored, bounded
patterns: it is never evaluated, and nothing in it is echoed back except the short model
name accelerate's title holds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from calculator.answers import evidence_logs as logs
from calculator.answers import evidence_tables as tables
from calculator.core.errors import CalculatorError
from calculator.core.limits import MAX_EVIDENCE_BYTES

MAX_BYTES = MAX_EVIDENCE_BYTES
KINDS = ("oom-message", "nvidia-smi", "vllm-log", "sglang-log", "accelerate-estimate", "memory-summary")

# The figure each kind cannot do without: without it the paste is truncated or not that kind.
REQUIRED = {
    "nvidia-smi": ("gpus",),
    "vllm-log": ("kv_tokens", "available_kv_bytes", "weights_bytes"),  # any one of them
    "sglang-log": ("kv_tokens", "weights_bytes"),
    "accelerate-estimate": ("rows",),
    "memory-summary": ("allocated_peak_bytes", "reserved_peak_bytes"),
}


@dataclass(frozen=True)
class Evidence:
    kind: str
    figures: dict  # JSON-ready: sizes in bytes (int), counts, a few short strings
    causes: tuple[dict, ...] = field(default_factory=tuple)  # oom-message: its reader's causes

    def to_json(self) -> dict:
        return {"kind": self.kind, "figures": self.figures, **({"causes": list(self.causes)} if self.causes else {})}


def decode(data: bytes) -> str:
    """Bytes from a file or stdin, as text: too long, binary or not UTF-8 is refused."""
    if len(data) > MAX_BYTES:
        raise CalculatorError("evidence_too_long", limit_kib=MAX_BYTES // 1024)
    if b"\x00" in data:
        raise CalculatorError("evidence_not_text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")  # a log from a Windows console: the figures are ASCII


def detect(text: str) -> str | None:
    """The kind of evidence the text is, or None. Most specific first: a vLLM log may quote an
    out-of-memory message, a memory summary may sit under a traceback."""
    if tables.looks_like_memory_summary(text):
        return "memory-summary"
    if tables.looks_like_accelerate(text):
        return "accelerate-estimate"
    if logs.looks_like_vllm(text):
        return "vllm-log"
    if logs.looks_like_sglang(text):
        return "sglang-log"
    if tables.looks_like_nvidia_smi(text):
        return "nvidia-smi"
    from calculator.memory.oom_message import read as read_oom  # its own markers decide

    reading = read_oom(text)
    return "oom-message" if reading.report is not None or reading.mentions_oom else None


def read(text: object, kind: str | None = None) -> Evidence:
    """The figures of one piece of evidence; `kind` forces a reader (else it is recognised)."""
    if not isinstance(text, str):
        raise CalculatorError("evidence_not_text")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise CalculatorError("evidence_too_long", limit_kib=MAX_BYTES // 1024)
    if not text.strip():
        raise CalculatorError("evidence_empty")
    if kind is not None and kind not in KINDS:
        raise CalculatorError("evidence_unknown_kind", kind=str(kind)[:30], choices=", ".join(KINDS))
    found = kind or detect(text)
    if found is None:
        raise CalculatorError("evidence_unrecognised")
    if found == "oom-message":
        return _oom(text)
    figures = READERS[found](text)
    if not any(figures.get(key) for key in REQUIRED[found]):
        raise CalculatorError("evidence_incomplete", kind=found)
    return Evidence(found, figures)


def _oom(text: str) -> Evidence:
    from calculator.memory.oom_message import read as read_oom

    reading = read_oom(text)
    if reading.report is None:
        raise CalculatorError("evidence_oom_no_figures" if reading.mentions_oom else "evidence_unrecognised")
    report = reading.report
    figures = asdict(report)
    figures["processes"] = [{"pid": pid, "used_bytes": size} for pid, size in report.processes]
    figures.update(reserved_unallocated=report.reserved_unallocated, outside_pytorch=report.outside_pytorch,
                   other_processes=report.other_processes)
    causes = tuple({"code": cause.code, **cause.params} for cause in reading.causes)
    return Evidence("oom-message", figures, causes)


READERS = {
    "nvidia-smi": tables.read_nvidia_smi,
    "vllm-log": logs.read_vllm,
    "sglang-log": logs.read_sglang,
    "accelerate-estimate": tables.read_accelerate,
    "memory-summary": tables.read_memory_summary,
}
