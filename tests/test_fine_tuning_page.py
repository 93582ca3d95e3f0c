"""The fine-tuning chapter through AppTest: its calculators show the engine's figures in the
reader's language, and bad input gets a clear message with what was typed shown as text."""

from __future__ import annotations

from calculator.models import catalog
from calculator.core.budget import Budget
from calculator.core.gpus import gpu
from calculator.training import STRATEGIES, TrainingSetup, fewest_gpus, rule_of_thumb_bytes, traits_from_config, \
    training_memory
from calculator.core.units import format_bytes
from tests.apptest import open_page

SLUG = "fine-tuning"


def metrics(at) -> list[str]:
    return [m.value for m in at.metric]


def test_training_memory_shows_the_engines_peak_and_the_rule_in_both_languages():
    summary, spec = catalog.stored_summary("llama-3-8b"), catalog.stored_spec("llama-3-8b")
    peak = training_memory(summary, spec, TrainingSetup(), traits=traits_from_config(catalog.config("llama-3-8b")))
    rule = rule_of_thumb_bytes(summary.parameters)
    # the chapter's case set to TrainingSetup()'s defaults: full fine-tuning in mixed precision, no recomputation
    case = {"model": "llama-3-8b", "method": "full", "precision": "mixed", "checkpointing": "none", "batch": "1",
            "sequence": "2048"}
    en, fr = open_page(SLUG, "en", **case), open_page(SLUG, "fr", **case)
    assert not en.exception and not fr.exception
    assert format_bytes(peak.total_bytes, "en") in metrics(en)
    assert format_bytes(rule, "en", system="decimal") in metrics(en)
    assert format_bytes(rule, "fr", system="decimal") in metrics(fr)  # "64,24 Go"
    assert "Go" in format_bytes(rule, "fr", system="decimal")


def test_lora_targets_typed_by_the_reader_are_checked_and_escaped():
    at = open_page(SLUG, "fr", lo_targets="q_proj,[x](http://example.org)")
    assert not at.exception
    errors = [e.value for e in at.error]
    message = next(e for e in errors if "couche linéaire" in e)
    assert "](http" not in message and "\\[x\\]" in message


def test_impossible_zero_offload_says_what_to_do_in_french():
    at = open_page(SLUG, "fr", ze_stage="1", ze_offload="true", ze_offload_params="true")
    assert not at.exception
    assert any("niveau 3" in e.value for e in at.error)


def test_distributed_names_the_fewest_gpus_the_engine_finds():
    summary, spec = catalog.stored_summary("llama-3.1-70b"), catalog.stored_spec("llama-3.1-70b")
    setup = TrainingSetup(checkpointing="full", micro_batch=1, sequence=4096, gradient_accumulation=8)
    traits = traits_from_config(catalog.config("llama-3.1-70b"))
    capacity = Budget(gpu("h100"))  # what each H100 gives a process, with the headroom
    counts = [fewest_gpus(summary, spec, capacity, s, setup, traits) for s in STRATEGIES if s != "zero3-offload"]
    best = min(c.gpus for c in counts if c.gpus)
    at = open_page(SLUG, "en", model="llama-3.1-70b", gpu="h100", method="full", precision="mixed",
                   checkpointing="full", batch="1", sequence="4096")
    assert any(s.value.startswith("The fewest") and f"**{best}**" in s.value for s in at.success)


def test_softcapped_models_carry_a_warning_with_a_link_to_the_measurements():
    """Gemma 2's softcapping tensors are not counted yet: the three training calculators say so,
    in the reader's language, and only for such a model."""
    for lang, words in (("en", "softcapping"), ("fr", "softcapping")):
        at = open_page(SLUG, lang, tm_model="google/gemma-2-9b", ac_model="google/gemma-2-9b", lo_model="google/gemma-2-9b")
        assert not at.exception
        warnings = [w.value for w in at.warning if words in w.value]
        assert len(warnings) == 3
        assert all(f"(estimator?lang={lang}#accuracy)" in w for w in warnings)
    plain = open_page(SLUG, "en")
    assert not [w for w in plain.warning if "softcapping" in w.value]
