"""Hub ids, against a local server that answers like the Hub (HF_ENDPOINT), the real client."""

from __future__ import annotations

import json
import time

import pytest

from calculator.models import catalog
from calculator.core.errors import CalculatorError
from calculator.memory.estimate import estimate
from calculator.models.hub import fetch_config, is_hub_id
from tests.conftest import load_test_config
from tests.test_cli import cli


def test_hub_model_is_counted_from_its_config(hub):
    hub.add("someone/tiny-llama", {"config.json": load_test_config("tiny-llama")})
    result = estimate("someone/tiny-llama", dtypes=["float32"])
    assert result.source == "hub"
    assert result.summary.parameters > 0
    assert any("/someone/tiny-llama/resolve/main/config.json" in r for r in hub.requests)


def test_catalog_models_never_touch_the_hub(hub):
    estimate("meta-llama/Llama-2-7b-hf")
    assert hub.requests == []


@pytest.mark.parametrize("setup,code", [
    (lambda hub: None, "hub_not_found"),
    (lambda hub: (hub.add("org/model", {"config.json": {"model_type": "gpt2"}}), hub.gated.add("org/model")), "hub_gated"),
    (lambda hub: hub.add("org/model", {"README.md": "hello"}), "hub_no_config"),
    (lambda hub: hub.add("org/model", {"config.json": "{broken"}), "config_not_json"),
])
def test_hub_errors_are_clear(hub, setup, code):
    setup(hub)
    with pytest.raises(CalculatorError) as info:
        fetch_config("org/model")
    assert info.value.code == code


def test_unreachable_hub_fails_fast_and_names_the_alternatives(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    start = time.perf_counter()
    with pytest.raises(CalculatorError) as info:
        fetch_config("org/unreachable-model")
    assert time.perf_counter() - start < 5
    assert info.value.code == "hub_unreachable"
    assert "catalog" in info.value.message("en") and "catalogue" in info.value.message("fr")


def test_a_config_another_tool_left_in_the_hub_cache_is_used_when_the_hub_goes_away(hub, monkeypatch):
    """fetch_config writes nothing to the Hub cache (it reads within bounds, in memory), but a
    config that huggingface_hub downloaded for another tool is used offline."""
    import huggingface_hub

    hub.add("org/cached", {"config.json": load_test_config("tiny-llama")})
    huggingface_hub.hf_hub_download("org/cached", "config.json", endpoint=hub.url)
    first = fetch_config("org/cached")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert fetch_config("org/cached") == first


def test_token_from_hf_token_is_sent(hub, monkeypatch):
    seen = []
    hub.add("org/private", {"config.json": {"model_type": "gpt2"}})
    original = hub._server.RequestHandlerClass._serve

    def spy(self, send_body):
        seen.append(self.headers.get("Authorization"))
        return original(self, send_body)

    monkeypatch.setattr(hub._server.RequestHandlerClass, "_serve", spy)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_for_test")
    fetch_config("org/private")
    assert "Bearer hf_secret_for_test" in seen


@pytest.mark.parametrize("name,ok", [
    ("meta-llama/Llama-2-7b-hf", True), ("gpt2", True), ("a/b.c_d-e", True),
    ("../etc/passwd", False), ("org/../x", False), ("org/name/extra", False), ("<script>/x", False),
    ("org/na me", False), ("", False), ("a" * 200, False), ("org--x/y", False),
])
def test_hub_ids_are_validated_before_any_request(name, ok):
    assert is_hub_id(name) is ok


def test_cli_reads_the_hub_through_hf_endpoint(hub):
    hub.add("someone/tiny-mixtral", {"config.json": load_test_config("tiny-mixtral")})
    out = cli("estimate", "someone/tiny-mixtral", "--json", env={"HF_ENDPOINT": hub.url})
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["source"] == "hub" and data["active_parameters"] < data["parameters"]


def test_cli_offline_hub_is_one_clear_line():
    out = cli("estimate", "org/not-cached", env={"HF_HUB_OFFLINE": "1"})
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "catalog" in out.stderr


def test_catalog_ids_work_offline():
    out = cli("estimate", catalog.find("mixtral-8x7b-v0.1").id, "--json", env={"HF_HUB_OFFLINE": "1"})
    assert json.loads(out.stdout)["active_parameters"] == 12_879_925_248
