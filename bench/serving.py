"""Serving engines: `python -m calculator serve` against published startup logs.

Each row of bench/data/serving_logs.json is one engine start that someone published (a
GitHub issue or pull request, a documentation page, the llm-d-planner log archive): the
model, the card, the flags, and what the engine printed. The row's `serve` field gives the
calculator's arguments for the same run; the benchmark compares the KV cache size in tokens
the engine logged ("GPU KV cache size: N tokens" in vLLM, "#tokens: N" in SGLang) with the
calculator's `kv_tokens`, and, where logged, the weights and the activation reserve.
Rows the calculator cannot reproduce are listed with the reason (another engine accounting,
no config, an unknown card). Target: KV cache tokens within 5%. Development rows set one of
the measured constants of calculator/serving/engines.py; the others only check. Run:
python -m bench serving
"""

from __future__ import annotations

from calculator.core.units import GIB
from dataclasses import dataclass
from functools import lru_cache
import json
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
LOGS = DATA / "serving_logs.json"
TARGET = 0.05
# The accounting these logs were written by (serving.versions.ENGINE_VERSIONS): not the current one.
PUBLISHED_VERSIONS = {"vllm": "0.19", "sglang": "0.4.6"}


@dataclass(frozen=True)
class Comparison:
    id: str
    model: str
    engine: str
    version: str
    gpu: str
    tensor: int
    dtype: str
    kv_dtype: str
    context: int
    utilization: float
    logged_tokens: int
    predicted_tokens: int
    logged_weights_gib: float | None
    predicted_weights_gib: float
    logged_activation_gib: float | None
    predicted_activation_gib: float
    split: str
    source_url: str

    @property
    def error(self) -> float:
        return self.predicted_tokens / self.logged_tokens - 1

    @property
    def within_target(self) -> bool:
        return abs(self.error) <= TARGET


@lru_cache(maxsize=1)
def rows() -> tuple[dict, ...]:
    return tuple(json.loads(LOGS.read_text(encoding="utf-8"))["rows"])


def compared_rows() -> list[dict]:
    return [row for row in rows() if row["skip"] is None]


def skipped_rows() -> list[dict]:
    return [row for row in rows() if row["skip"] is not None]


@lru_cache(maxsize=8)
def model_of(config: str):
    """A catalog model, or a config saved under bench/data/ (counted on the meta device)."""
    from calculator.models.seam import catalog_model, resolve_config

    if config.endswith(".json"):
        data = json.loads((DATA / config).read_text(encoding="utf-8"))
        data.pop("_note", None)
        return resolve_config(data, Path(config).stem)
    return catalog_model(config)


def compare(row: dict) -> Comparison:
    from calculator.core.gpus import gpu
    from calculator.serving.plan import serve

    args = row["serve"]
    model = model_of(row["config"])
    plan = serve(model, gpu(args["gpu"]), engine=args["engine"], tensor=args["tensor"], dtype=args["dtype"],
                 kv_dtype=args["kv_dtype"], context=args["context"], utilization=args["utilization"], layouts=False,
                 engine_version=args.get("engine_version", PUBLISHED_VERSIONS[args["engine"]]))
    logged = row["logged"]
    weights = logged.get("weights_gib", logged.get("weights_gb", logged.get("weights_gb_per_gpu")))
    return Comparison(row["id"], row["model"], args["engine"], row["engine_version"].split(" ")[0], args["gpu"],
                      args["tensor"], args["dtype"], args["kv_dtype"], args["context"], args["utilization"],
                      logged["kv_tokens"], plan.replica.kv_tokens, weights,
                      plan.replica.weights_bytes_per_gpu / GIB, logged.get("activation_peak_gib"),
                      plan.replica.activation_reserve_bytes / GIB, row["split"], row["source_url"])


def comparisons() -> list[Comparison]:
    return [compare(row) for row in compared_rows()]


@dataclass(frozen=True)
class PoolCheck:
    """The cache layout alone, with the memory the engine logged as available: the blocks that
    memory buys (the printed GiB are rounded to 0.01, so a range), the tokens and the maximum
    concurrency vLLM prints for the blocks it logged. It checks the groups of layers, their page
    and what a sliding or chunked layer holds, whatever the weights and the reserve."""

    id: str
    model: str
    groups: int
    block_bytes: int
    blocks_range: tuple[int, int]
    logged_blocks: int
    logged_tokens: int
    predicted_tokens: int
    logged_concurrency: float
    predicted_concurrency: float

    @property
    def within_rounding(self) -> bool:
        low, high = self.blocks_range
        return (low <= self.logged_blocks <= high and self.predicted_tokens == self.logged_tokens
                and round(self.predicted_concurrency, 2) == self.logged_concurrency)


def pool_rows() -> list[dict]:
    """vLLM 0.19 rows with a model and the blocks and available memory they logged."""
    return [row for row in rows() if row["config"] and row["engine_version"] == "0.19.0"
            and (row["serve"] or row.get("pool")) and "gpu_blocks" in row["logged"]]


def pool_check(row: dict) -> PoolCheck:
    from calculator.core.gpus import gpu
    from calculator.serving.engines import concurrency, kv_element_bytes, kv_groups, pool_blocks, pool_tokens
    from calculator.serving.vllm import default_limits

    args, logged = row["serve"] or row["pool"], row["logged"]
    groups = kv_groups(model_of(row["config"]).spec, args["tensor"], kv_element_bytes(args["dtype"], args["kv_dtype"]))
    card = gpu(args["gpu"])
    batched, _ = default_limits(card.total_bytes, card.key)
    low, high = (pool_blocks(groups, int((logged["available_kv_gib"] + d) * GIB)) for d in (-0.005, 0.005))
    blocks = logged["gpu_blocks"]
    return PoolCheck(row["id"], row["model"], len(groups), groups[0].page_bytes * groups[0].layers, (low, high), blocks,
                     logged["kv_tokens"], pool_tokens(groups, blocks), logged["max_concurrency"],
                     concurrency(blocks, groups, logged["concurrency_context"], batched))


def pool_checks() -> list[PoolCheck]:
    return [pool_check(row) for row in pool_rows()]


def pool_table(results: list[PoolCheck]) -> str:
    lines = ["| run | model | groups | bytes a block | blocks for the logged GiB | logged blocks | "
             "KV tokens (logged / from the blocks) | concurrency (logged / predicted) | within rounding |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in results:
        low, high = c.blocks_range
        lines.append(f"| {c.id} | {c.model} | {c.groups} | {c.block_bytes:,} | {low:,} - {high:,} | "
                     f"{c.logged_blocks:,} | {c.logged_tokens:,} / {c.predicted_tokens:,} | "
                     f"{c.logged_concurrency:.2f} / {c.predicted_concurrency:.2f} | "
                     f"{'yes' if c.within_rounding else 'NO'} |")
    return "\n".join(lines)


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(results: list[Comparison]) -> str:
    lines = ["| run | model | engine | GPU x TP | weights / cache | context | util | logged KV tokens | "
             "predicted | error | weights GiB (logged / predicted) | activation GiB (logged / predicted) | split |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in results:
        lines.append(
            f"| {c.id} | {c.model} | {c.engine} {c.version} | {c.gpu} x {c.tensor} | {c.dtype} / {c.kv_dtype} | "
            f"{c.context:,} | {c.utilization:g} | {c.logged_tokens:,} | {c.predicted_tokens:,} | {c.error:+.2%} | "
            f"{_gib(c.logged_weights_gib)} / {c.predicted_weights_gib:.2f} | "
            f"{_gib(c.logged_activation_gib)} / {c.predicted_activation_gib:.2f} | {c.split} |")
    return "\n".join(lines)


def summary(results: list[Comparison]) -> str:
    lines = ["| split | runs | within 5% | median error | largest error |", "|---|---|---|---|---|"]
    for split in ("development", "check"):
        errors = sorted(abs(c.error) for c in results if c.split == split)
        if not errors:
            continue
        inside = sum(e <= TARGET for e in errors)
        lines.append(f"| {split} | {len(errors)} | {inside} | {errors[len(errors) // 2]:.2%} | {errors[-1]:.2%} |")
    return "\n".join(lines)


def main() -> None:
    results = comparisons()
    print("## Serving engines: KV cache tokens, `serve` against published startup logs\n")
    print(summary(results) + "\n")
    print(table(results) + "\n")
    print("Runs not compared:\n")
    for row in skipped_rows():
        print(f"- {row['id']} ({row['model']}): {row['skip']}")
    print()
    pools = pool_checks()
    inside = sum(c.within_rounding for c in pools)
    print(f"## vLLM 0.19's cache layout from the logged available memory: {inside} of {len(pools)} "
          "within the rounding of the printed GiB\n")
    print(pool_table(pools) + "\n")
    from bench import serving_current

    serving_current.main()


if __name__ == "__main__":
    main()
