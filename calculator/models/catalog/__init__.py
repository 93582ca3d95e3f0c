"""The bundled catalog: configs of popular checkpoints and their stored exact counts.

A lookup reads two small files and never imports torch. `refresh()` recomputes the stored
counts with the same code as any other config; tests check that they are not stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
import json
from pathlib import Path
import tomllib

from calculator.models.architecture import ArchSpec
from calculator.models.summary import ModelSummary

HERE = Path(__file__).resolve().parent
CONFIG_DIR = HERE / "configs"
INDEX_FILE = HERE / "models.toml"
RESULTS_FILE = HERE / "results.json"


@dataclass(frozen=True)
class CatalogEntry:
    key: str  # short name, also the config file's stem
    id: str  # the Hub id of the checkpoint
    kind: str
    attention: str
    tags: tuple[str, ...] = ()
    note: str = ""
    source: str = ""  # where the stored config.json was published

    @property
    def config_path(self) -> Path:
        return CONFIG_DIR / f"{self.key}.json"


@lru_cache(maxsize=1)
def entries() -> tuple[CatalogEntry, ...]:
    with open(INDEX_FILE, "rb") as handle:
        table = tomllib.load(handle)
    return tuple(
        CatalogEntry(key=key, id=row["id"], kind=row["kind"], attention=row["attention"],
                     tags=tuple(row.get("tags", ())), note=row.get("note", ""), source=row.get("source", ""))
        for key, row in table.items()
    )


@lru_cache(maxsize=1)
def _by_name() -> dict[str, CatalogEntry]:
    names: dict[str, CatalogEntry] = {}
    for entry in entries():
        for name in (entry.key, entry.id, entry.id.split("/")[-1]):
            names.setdefault(name.lower(), entry)
    return names


def find(name: str) -> CatalogEntry | None:
    """The catalog entry for a short name, a Hub id or a repo name, any letter case."""
    if not isinstance(name, str):
        return None
    return _by_name().get(name.strip().lower())


def search(query: str, limit: int = 20) -> list[CatalogEntry]:
    """Entries whose name, id, kind or tags contain every word of the query."""
    words = str(query).lower().split()
    hits = []
    for entry in entries():
        haystack = " ".join((entry.key, entry.id, entry.kind, entry.attention, *entry.tags)).lower()
        if all(word in haystack for word in words):
            hits.append(entry)
    return hits[:limit]


@cache
def config(key: str) -> dict:
    return json.loads((CONFIG_DIR / f"{key}.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _results() -> dict:
    return json.loads(RESULTS_FILE.read_text(encoding="utf-8"))


def stored_summary(key: str, model_class: str = "auto") -> ModelSummary:
    return ModelSummary.from_dict(_results()["models"][key][model_class])


def stored_spec(key: str) -> ArchSpec:
    return ArchSpec.from_dict(_results()["models"][key]["architecture"])


def stored_versions() -> dict[str, str]:
    return dict(_results()["versions"])


def compute_all() -> dict:
    """Every catalog model counted on the meta device, in both model classes."""
    import torch
    import transformers

    from calculator.models.meta import MODEL_CLASSES, count

    models = {}
    for entry in entries():
        counted = {cls: count(config(entry.key), cls) for cls in MODEL_CLASSES}
        models[entry.key] = {cls: summary.to_dict() for cls, (summary, _) in counted.items()}
        models[entry.key]["architecture"] = counted["auto"][1].to_dict()
    return {"versions": {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__},
            "models": models}


def refresh() -> Path:
    """Recompute and store the catalog's counts (run after changing a config or transformers)."""
    RESULTS_FILE.write_text(json.dumps(compute_all(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    _results.cache_clear()
    return RESULTS_FILE
