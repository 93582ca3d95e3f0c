"""The bundled catalog: published counts, coverage, stored figures that cannot go stale."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from calculator.models import catalog
from tests.conftest import ROOT

# Parameter counts published by the model authors or printed by transformers' own tooling
# for the released checkpoints (the class in architectures[0]).
PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "mistral-7b-v0.1": 7_241_732_096,
    "gpt2": 124_439_808,
    "t5-base": 222_903_552,
    "llama-3-8b": 8_030_261_248,
    "mixtral-8x7b-v0.1": 46_702_792_704,
    "gemma-2-9b": 9_241_705_984,
    "qwen2.5-7b": 7_615_616_512,
    "llama-3.1-405b": 405_853_388_800,
}
# accelerate builds the base AutoModel: without Llama-3's untied lm_head (DESIGN.md).
PUBLISHED_BASE = {"llama-3-8b": 7_504_924_672, "bert-base-cased": 108_310_272}


@pytest.mark.parametrize("key,count", PUBLISHED.items())
def test_published_parameter_counts(key, count):
    assert catalog.stored_summary(key).parameters == count


@pytest.mark.parametrize("key,count", PUBLISHED_BASE.items())
def test_base_class_counts(key, count):
    assert catalog.stored_summary(key, "base").parameters == count


def test_bert_base_cased_matches_accelerates_documented_figure():
    # accelerate's docs: bert-base-cased, float32, 413.18 MB (really MiB) = 433,249,280 bytes.
    summary = catalog.stored_summary("bert-base-cased", "base")
    assert summary.total_bytes_at("float32") == 433_249_280
    assert round(433_249_280 / 2**20, 2) == 413.18


def test_moe_active_counts_match_the_model_cards():
    # Mixtral paper: 12.9B active of 46.7B; DeepSeek-V3 report: 37B of 671B; Qwen3-30B-A3B: 3.3B.
    assert round(catalog.stored_summary("mixtral-8x7b-v0.1").active_parameters / 1e9, 1) == 12.9
    assert 37e9 <= catalog.stored_summary("deepseek-v3").active_parameters < 38e9
    assert 3.3e9 <= catalog.stored_summary("qwen3-30b-a3b").active_parameters < 3.4e9


def test_catalog_covers_what_the_guide_promises():
    entries = catalog.entries()
    assert len(entries) >= 25
    kinds = {e.kind for e in entries}
    attention = {e.attention for e in entries}
    tags = {t for e in entries for t in e.tags}
    assert {"encoder", "decoder", "encoder-decoder", "vision"} <= kinds
    assert {"mha", "gqa", "mqa", "mla"} <= attention
    assert {"mixture of experts", "sliding window", "tied head", "untied head"} <= tags
    sizes = [catalog.stored_summary(e.key).parameters for e in entries]
    assert min(sizes) < 150e6 and max(sizes) > 400e9


def test_every_entry_has_a_config_and_stored_counts():
    for entry in catalog.entries():
        assert entry.config_path.is_file(), entry.key
        for cls in ("auto", "base"):
            assert catalog.stored_summary(entry.key, cls).parameters > 0


def test_lookup_by_short_name_hub_id_and_repo_name():
    assert catalog.find("gpt2").key == "gpt2"
    assert catalog.find("meta-llama/Llama-2-7b-hf").key == "llama-2-7b"
    assert catalog.find("MISTRAL-7B-V0.1").key == "mistral-7b-v0.1"
    assert catalog.find("no-such-model") is None
    assert [e.key for e in catalog.search("mixture of experts")] == [
        "deepseek-v2-lite", "qwen3-30b-a3b", "mixtral-8x7b-v0.1", "deepseek-v3", "gpt-oss-20b", "gpt-oss-120b",
        "qwen3-235b-a22b", "llama-4-scout", "llama-4-maverick"]


def test_stored_results_are_not_stale():
    """Recompute every catalog model with the installed transformers: identical to the file."""
    stored = json.loads(catalog.RESULTS_FILE.read_text())
    fresh = catalog.compute_all()
    assert fresh["versions"] == stored["versions"], "run: python -m calculator refresh-catalog"
    for key, classes in fresh["models"].items():
        assert classes == stored["models"][key], f"{key}: run python -m calculator refresh-catalog"


def test_catalog_lookup_needs_no_torch():
    code = ("import sys; from calculator.memory.estimate import estimate; "
            "r = estimate('llama-2-7b'); assert r.summary.parameters == 6738415616; "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
