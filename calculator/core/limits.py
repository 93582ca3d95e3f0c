"""One table of the bounds every number a reader types must stay within, for the engine, the
case bar, the calculators' own overrides and every CLI command alike. A bound protects the
arithmetic and the server's time, not the reader's ambitions: far beyond any real job, never
beyond what a widget or a loop can take. A value outside its bound is refused with a message
that names that value, in the reader's language (content/ui/<lang>/limits.toml holds the names,
errors.toml the sentence).
"""

from __future__ import annotations

from dataclasses import dataclass

from calculator.core.errors import CalculatorError, Grouped


@dataclass(frozen=True)
class Limit:
    low: int
    high: int
    unit: str  # what is counted: sequences, tokens, GPUs...
    kind: str = "whole"  # every bound here is a whole number


TOKENS = 10**8  # far beyond any context window
# What a reader may paste as evidence (a start-up log with its progress bars is a few hundred
# KiB at most); every reader of it reads all of it, an out-of-memory message included.
MAX_EVIDENCE_BYTES = 512 * 1024
LIMITS: dict[str, Limit] = {
    "batch": Limit(1, 10**6, "sequences"),
    "micro_batch": Limit(1, 10**6, "sequences"),
    "context": Limit(1, TOKENS, "tokens"),
    "prompt": Limit(1, TOKENS, "tokens"),
    "new_tokens": Limit(1, TOKENS, "tokens"),
    "sequence": Limit(1, TOKENS, "tokens"),
    "encoder": Limit(1, TOKENS, "tokens"),
    "tokens": Limit(1, TOKENS, "tokens"),
    "max_num_batched_tokens": Limit(1, TOKENS, "tokens"),
    "max_num_seqs": Limit(1, 10**6, "sequences"),
    "users": Limit(1, 10**7, "sequences"),
    "samples": Limit(1, 10**12, "samples"),
    "items": Limit(1, 999_999_999, "items"),
    "gpus": Limit(1, 100_000, "GPUs"),
    "gpus_per_node": Limit(1, 64, "GPUs"),
    "nodes": Limit(1, 100_000, "nodes"),
    "tensor": Limit(1, 16, "GPUs"),  # one NVLink domain: the serving layouts and training plans stop there
    "pipeline": Limit(1, 100_000, "stages"),
    "micro_batches": Limit(1, 256, "micro-batches"),
    "gradient_accumulation": Limit(1, 10_000, "steps"),
    "lora_rank": Limit(1, 4096, "rank"),
}


class Term(str):
    """The name of a limited value, shown in the reader's language (limits.<name>)."""

    def shown(self, lang: str) -> str:
        from calculator.core.messages import text

        return text(f"limits.{self}", lang)


def check(name: str, value: object) -> int:
    """`value` if it is a whole number within LIMITS[name], else a CalculatorError naming it."""
    limit = LIMITS[name]
    if isinstance(value, bool) or not isinstance(value, int) or not limit.low <= value <= limit.high:
        raise CalculatorError("out_of_range", what=Term(name), value=str(value)[:30], low=Grouped(limit.low),
                              high=Grouped(limit.high))
    return value


def high(name: str) -> int:
    return LIMITS[name].high
