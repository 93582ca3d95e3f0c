"""Current vLLM (CUDA graph memory in the share, the default since v0.21.0) against published
start-up lines of that version (bench/data/serving_logs_current.json), printed by
`python -m bench serving`.

Two checks, since the published runs use models or cards outside the catalog:
- the accounting: vLLM prints which share would give the same pool without its CUDA graph
  estimate; calculator/serving/engines.py's current accounting takes the estimate out of the share of
  the *total* memory, so |share - equivalent share| x total = estimate. On a card of gpus.toml
  the total this implies must match PyTorch's total within the rounding of the printed figures;
- the estimate itself against CUDA_GRAPH_BYTES, the figure `serve` subtracts.

Rows whose card is in the catalog and whose model is too (or has a config under bench/data/configs)
carry a `serve` field and are also compared on what the engine printed: "GPU KV cache size: N
tokens", "Available KV cache memory" and, where quoted, "Model loading took", against `serve`
with the current accounting. Target: KV_TARGET (see its comment); a row outside it says why in
`reported_gap` and is listed apart, not counted as within.
"""

from __future__ import annotations

from calculator.core.units import GIB
from dataclasses import dataclass
import json
from pathlib import Path

LOGS = Path(__file__).resolve().parent / "data" / "serving_logs_current.json"
# What the current accounting does not model on a card other than the H100s its constants come
# from: the CUDA graph estimate (0.50 GiB subtracted; 0.13 to 0.62 GiB logged with default
# capture sizes), the non-torch growth (0.25 GiB measured on H100s only) and the profile run's
# peak (fitted on 0.19's logs): about ±0.2 GiB in all, 3% of a 6 GiB pool.
KV_TARGET = 0.03


@dataclass(frozen=True)
class GraphCheck:
    id: str
    version: str
    gpu: str
    capture: str
    logged_gib: float
    implied_total_gib: float
    card_total_gib: float | None
    rounding: float  # the relative uncertainty of the implied total from the printed digits
    source_url: str

    @property
    def error(self) -> float | None:
        return None if self.card_total_gib is None else self.implied_total_gib / self.card_total_gib - 1

    @property
    def within_rounding(self) -> bool | None:
        return None if self.error is None else abs(self.error) <= self.rounding


def rows() -> list[dict]:
    return json.loads(LOGS.read_text(encoding="utf-8"))["rows"]


def check(row: dict) -> GraphCheck:
    from calculator.core.gpus import gpu

    logged = row["logged"]
    delta = abs(logged["utilization"] - logged["equivalent_utilization"])
    estimate = logged["cuda_graph_gib"]
    # two decimals on the estimate (±0.005 GiB), four on each share (±0.00005 each)
    rounding = 0.005 / estimate + 0.0001 / delta
    card = gpu(row["catalog_gpu"]).total_bytes / GIB if row["catalog_gpu"] else None
    return GraphCheck(row["id"], row["engine_version"].split(" ")[0], row["gpu"], row["capture"], estimate,
                      estimate / delta, card, rounding, row["source_url"])


def checks() -> list[GraphCheck]:
    """The rows that quote vLLM's "equivalent share" line (a table of tokens alone does not)."""
    return [check(row) for row in rows() if "equivalent_utilization" in row["logged"]]


@dataclass(frozen=True)
class KvCheck:
    id: str
    version: str
    model: str
    gpu: str
    logged_tokens: int
    predicted_tokens: int
    logged_available_gib: float | None  # None where the post quotes the tokens only
    predicted_available_gib: float
    source_url: str
    logged_weights_gib: float | None = None  # "Model loading took", where quoted
    predicted_weights_gib: float = 0.0
    reported_gap: str | None = None  # why a row outside KV_TARGET is reported, not counted

    @property
    def error(self) -> float:
        return self.predicted_tokens / self.logged_tokens - 1

    @property
    def available_error(self) -> float | None:
        if self.logged_available_gib is None:
            return None
        return self.predicted_available_gib / self.logged_available_gib - 1

    @property
    def within_target(self) -> bool:
        return abs(self.error) <= KV_TARGET


def kv_rows() -> list[dict]:
    return [row for row in rows() if row.get("serve")]


def kv_check(row: dict) -> KvCheck:
    from bench.serving import model_of
    from calculator.core.gpus import gpu
    from calculator.serving.plan import serve

    args = row["serve"]
    limits = {key: args[key] for key in ("max_num_seqs", "max_num_batched_tokens") if key in args}
    plan = serve(model_of(args["model"]), gpu(args["gpu"]), tensor=args["tensor"], dtype=args["dtype"],
                 kv_dtype=args["kv_dtype"], context=args["context"], utilization=args["utilization"],
                 usage=args["usage"], layouts=False, **limits)
    logged, replica = row["logged"], plan.replica
    return KvCheck(row["id"], row["engine_version"].split(" ")[0], row["model"], args["gpu"], logged["kv_tokens"],
                   replica.kv_tokens, logged.get("available_kv_gib"), replica.available_kv_bytes_per_gpu / GIB,
                   row["source_url"], logged.get("weights_gib"), replica.weights_bytes_per_gpu / GIB,
                   row.get("reported_gap"))


def kv_checks() -> list[KvCheck]:
    return [kv_check(row) for row in kv_rows()]


def kv_table(results: list[KvCheck]) -> str:
    lines = ["| run | version | model | GPU | logged KV tokens | predicted | error | available KV GiB "
             "(logged / predicted) | weights GiB (logged / predicted) |", "|---|---|---|---|---|---|---|---|---|"]
    for c in results:
        logged = "-" if c.logged_available_gib is None else f"{c.logged_available_gib:.2f}"
        weights = "-" if c.logged_weights_gib is None else f"{c.logged_weights_gib:.2f}"
        lines.append(f"| [{c.id}]({c.source_url}) | {c.version} | {c.model} | {c.gpu} | {c.logged_tokens:,} | "
                     f"{c.predicted_tokens:,} | {c.error:+.2%} | {logged} / {c.predicted_available_gib:.2f} | "
                     f"{weights} / {c.predicted_weights_gib:.2f} |")
    return "\n".join(lines)


def table(results: list[GraphCheck]) -> str:
    from calculator.serving.vllm import CUDA_GRAPH_BYTES

    ours = CUDA_GRAPH_BYTES / GIB
    lines = [f"CUDA graph estimate subtracted by `serve` (current vLLM): {ours:.2f} GiB per GPU.\n",
             "| run | version | GPU | capture sizes | estimate logged (GiB) | vs ours | total implied (GiB) | "
             "card's total (GiB) | error | within rounding |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in results:
        card = "-" if c.card_total_gib is None else f"{c.card_total_gib:.2f}"
        error = "-" if c.error is None else f"{c.error:+.1%}"
        inside = "-" if c.within_rounding is None else ("yes" if c.within_rounding else f"no (±{c.rounding:.1%})")
        lines.append(f"| [{c.id}]({c.source_url}) | {c.version} | {c.gpu} | {c.capture} | {c.logged_gib:.2f} | "
                     f"{ours / c.logged_gib:.2f}x | {c.implied_total_gib:.2f} | {card} | {error} | {inside} |")
    return "\n".join(lines)


def main() -> None:
    results = checks()
    print(f"## Current vLLM: CUDA graphs in the share, against the {len(results)} of {len(rows())} published "
          "starts that print vLLM's equivalent share\n")
    print(table(results) + "\n")
    kv = kv_checks()
    print(f"KV cache tokens, current accounting, on the {len(kv)} run(s) with a catalog card and a model of the "
          "catalog or of bench/data/configs "
          f"(target: within {KV_TARGET:.0%}):\n")
    print(kv_table(kv) + "\n")
    for c in kv:
        if c.reported_gap:
            print(f"- {c.id}: reported, not counted ({c.reported_gap}).")
    for row in rows():
        if not row.get("serve"):
            print(f"- {row['id']}: KV cache tokens not compared ({row['kv_skip']}).")
