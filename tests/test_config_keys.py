"""The cheap checks know every size key the installed transformers uses: a walk over all its
config classes, the keys the hostile-input probe found escaping (depth, depths, num_blocks,
hidden_sizes, num_labels), label maps, and the keys that choose code at load time."""

from __future__ import annotations

import json
import re
import time

import pytest

from calculator.models import catalog
from calculator.models.configs import (
    MAX_LABELS, NOT_SIZE_PATTERN, check_config, size_group, transformers_config_keys, without_runtime_keys,
)
from calculator.core.errors import CalculatorError
from calculator.models.seam import resolve_config

# Words that say a key sizes the model: a key holding a whole number and carrying one of them
# must have a size group, unless the not-a-size pattern names it (an index, a divisor, a rate).
SIZE_WORDS = re.compile(r"layers|blocks|depth|stages|expert|heads|labels|classes|vocab|hidden|_dim|dim_|size|"
                        r"channels|embed|width")


@pytest.fixture(scope="module")
def scanned():
    return transformers_config_keys()


def test_the_scan_sees_the_whole_of_transformers(scanned):
    for key in ("num_hidden_layers", "depth", "depths", "num_blocks", "hidden_sizes", "num_labels", "embed_dims",
                "encoder_layers", "num_local_experts", "n_layer", "vocab_size"):
        assert key in scanned, key
    assert len(scanned) > 1000


def test_every_size_key_of_transformers_has_a_group(scanned):
    escaping = sorted(k for k in scanned if SIZE_WORDS.search(k.lower()) and size_group(k) is None
                      and not NOT_SIZE_PATTERN.search(k.lower()))
    assert not escaping, f"size keys no check knows: {escaping}"


def test_the_keys_the_probe_found_are_held(scanned):
    assert {size_group(k) for k in ("depth", "depths", "num_blocks", "num_layers", "encoder_layers")} == {"layers"}
    assert size_group("hidden_sizes") == size_group("embed_dims") == "width"
    assert size_group("num_labels") == "labels"
    # indices, ids and rates are not sizes: -2 (from the end) and token ids stay accepted
    assert size_group("vision_feature_layer") is size_group("bos_token_id") is size_group("sampling_rate") is None


def test_every_default_of_every_config_class_passes(scanned):
    """No real model is refused by a bound: each class's own defaults pass the checks."""
    refused = []
    for key, uses in scanned.items():
        for cls, default in uses:
            try:
                check_config({"model_type": "any", key: default})
            except CalculatorError as error:
                refused.append((cls, key, default, error.code))
    assert not refused, refused[:10]


def test_the_catalog_passes():
    for entry in catalog.entries():
        check_config(catalog.config(entry.key))


def refused(config: dict) -> str:
    start = time.perf_counter()
    with pytest.raises(CalculatorError) as info:
        check_config(config)
    assert time.perf_counter() - start < 0.1  # static: nothing is built
    assert info.value.message("fr") != info.value.message("en")
    return info.value.code


@pytest.mark.parametrize("change", [
    {"depth": 20_000}, {"depths": [2, 2, 20_000, 2]}, {"depths": [500, 500, 500]}, {"num_blocks": 10**6},
    {"hidden_sizes": [10**7, 10**7, 10**7, 10**7]}, {"embed_dims": [64, -5]}, {"num_labels": 10**8},
    {"num_labels": -3}, {"encoder_layers": 10**5}, {"num_experts": 10**9}, {"depth": 1e9}, {"depth": float("inf")},
    {"depths": [[2, 2], [2, 10**6]]}, {"hidden_sizes": [64] * 5000},
])
def test_sizes_no_hand_list_named_are_refused_statically(change):
    base = catalog.config("vit-base-patch16-224")
    assert refused({**base, **change}) in ("config_bad_value", "config_bad_list", "config_bad_layer_total")


def test_a_sub_config_is_held_like_the_top():
    config = {"model_type": "llava", "vision_config": {"model_type": "clip_vision_model", "depth": 10**6}}
    assert refused(config) == "config_bad_value"


def test_wide_stage_lists_count_towards_the_absurd_bound():
    config = {"model_type": "convnext", "depths": [256, 256, 256, 256], "hidden_sizes": [262_144] * 4}
    assert refused(config) == "config_absurd"


def test_label_maps_are_bounded_and_typed():
    base = {**catalog.config("bert-base-cased"), "architectures": ["BertForSequenceClassification"]}
    too_many = {str(i): f"L{i}" for i in range(MAX_LABELS + 1)}
    assert refused({**base, "id2label": too_many}) == "config_bad_label_count"
    assert refused({**base, "label2id": {v: k for k, v in too_many.items()}}) == "config_bad_label_count"
    assert refused({**base, "id2label": [1, 2, 3]}) == "config_bad_labels"
    assert refused({**base, "id2label": "x" * 100}) == "config_bad_labels"
    check_config({**base, "num_labels": MAX_LABELS, "summary_proj_to_labels": True})  # a flag is not a size


def test_the_hundred_million_label_config_is_refused_at_once():
    """The probe's 800-byte config: 207 s and 22.7 GB before, refused in microseconds now."""
    import resource

    config = {**catalog.config("bert-base-cased"), "architectures": ["BertForSequenceClassification"],
              "num_labels": 100_000_000}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with pytest.raises(CalculatorError) as info:
        resolve_config(config, "labels.json")
    assert time.perf_counter() - start < 1
    assert info.value.code == "config_bad_value" and "num_labels" in info.value.message("fr")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB


def test_attention_implementation_keys_are_stripped_everywhere():
    kernel = "kernels-community/flash-attn3"
    config = {**catalog.config("llama-3.2-1b"), "_attn_implementation": kernel, "attn_implementation": kernel,
              "_attn_implementation_internal": kernel, "_experts_implementation": kernel, "use_kernels": True,
              "text_config": {"attn_implementation": kernel, "hidden_size": 64}, "layers": [{"_attn_implementation": kernel}]}
    clean = without_runtime_keys(config)
    assert kernel not in json.dumps(clean)
    assert clean["text_config"] == {"hidden_size": 64} and clean["layers"] == [{}]
    assert "_attn_implementation" in config  # the caller's dict is left as it was


def test_a_counted_config_never_carries_an_attention_implementation():
    from calculator.models.meta import make_config

    config = {**catalog.config("llama-3.2-1b"), "_attn_implementation": "kernels-community/flash-attn3",
              "attn_implementation": "kernels-community/flash-attn3"}
    model = resolve_config(config, "kernel.json")
    assert "kernels-community" not in model.config_json
    assert model.summary.parameters == catalog.stored_summary("llama-3.2-1b").parameters
    assert getattr(make_config(config), "_attn_implementation", None) in (None, "eager", "sdpa")
