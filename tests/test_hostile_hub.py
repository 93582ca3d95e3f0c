"""A hostile stand-in Hub (slow, huge, lying, redirecting answers): every case is refused
within its bound, in bytes (never more than the cap read, nothing written to the Hub cache)
and in time (the deadline, said in the message), and a stalled Hub is not paid again on the
next question."""

from __future__ import annotations

from pathlib import Path

import os
import resource
import time
import tracemalloc

import pytest

from calculator.models import hub as hub_module
from calculator.models import seam
from calculator.models.configs import MAX_CONFIG_BYTES
from calculator.core.errors import CalculatorError
from calculator.models.hub import fetch_config, redirect_allowed
from calculator.models.safetensors import MAX_INDEX_BYTES, read_headers, read_headers_here
from tests.conftest import load_test_config
from tests.hub_server import FakeHub

CONFIG = "/org/m/resolve/main/config.json"
INDEX = "/org/m/resolve/main/model.safetensors.index.json"


def plain(message: str) -> str:
    """French typography (when the guide has registered it) puts no-break spaces before units."""
    return message.replace("\u202f", " ").replace("\u00a0", " ")


def refused(call) -> tuple[CalculatorError, float]:
    start = time.monotonic()
    with pytest.raises(CalculatorError) as info:
        call()
    assert info.value.message("fr") != info.value.message("en")
    return info.value, time.monotonic() - start


@pytest.fixture
def short_deadline(monkeypatch):
    """A 2 s deadline and a 1 s stall (12 s and 4 s in service), so the suite stays quick."""
    monkeypatch.setattr(hub_module, "DEADLINE_SECONDS", 2.0)
    monkeypatch.setattr(hub_module, "STALL_SECONDS", 1.0)
    return hub_module.limit_seconds()


def cache_files() -> list[str]:
    found = []
    for root, _, files in os.walk(os.environ["HF_HOME"]):
        found += [os.path.join(root, name) for name in files]
    return found


def in_flight_bytes() -> int:
    """What loopback TCP can hold between the fake Hub's writes and our reads: the largest
    receive and send buffers the kernel allows (net.ipv4.tcp_rmem / tcp_wmem), plus 1 MiB."""
    total = 2**20
    for name in ("tcp_rmem", "tcp_wmem"):
        try:
            total += int(Path(f"/proc/sys/net/ipv4/{name}").read_text().split()[-1])
        except (OSError, ValueError, IndexError):
            total += 8 * 2**20
    return total


def test_a_300_mb_config_is_refused_after_the_cap_and_never_lands_on_disk(hub):
    hub.add("org/m", {})
    hub.hostile["org/m/config.json"] = {"huge": 300_000_000, "fill": b"{\"a\": 1, "}
    error, seconds = refused(lambda: fetch_config("org/m"))
    assert error.code == "config_too_large" and "2 MiB" in error.message("en") and "2 Mio" in plain(error.message("fr"))
    # The server keeps writing until it sees the socket closed: what the kernel's socket buffers
    # hold was sent but never read. Far below the 300 MB it would send to a reader that kept on.
    assert hub.sent_bytes[CONFIG] < MAX_CONFIG_BYTES + in_flight_bytes()
    assert cache_files() == [] and seconds < 10


def test_a_huge_index_is_refused_after_its_cap_in_the_worker_not_here(hub):
    hub.add("org/m", {"model.safetensors": b"\x02" + b"\0" * 7 + b"{}"})
    hub.hostile["org/m/model.safetensors.index.json"] = {"huge": 64 * 2**20, "fill": b"[{},"}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    error, _ = refused(lambda: read_headers("org/m"))
    assert error.code == "safetensors_index_too_large"
    assert "32 MiB" in error.message("en") and "32 Mio" in plain(error.message("fr"))
    assert hub.sent_bytes[INDEX] < MAX_INDEX_BYTES + in_flight_bytes()
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 16  # MiB, this process


def refused_with_peak(call):
    """The refusal `call` ends in, and the peak of Python memory traced while it ran."""
    tracemalloc.start()
    try:
        error, _ = refused(call)
        return error, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_an_index_of_empty_objects_under_the_cap_is_refused_before_it_is_parsed(hub):
    """30 MiB of `[{},{},...]` would parse into ~10 million dicts (about 1 GiB)."""
    hub.add("org/m", {"model.safetensors.index.json": b"[" + b"{}," * (10 * 2**20) + b"{}]"})
    error, peak = refused_with_peak(lambda: read_headers_here("org/m"))
    assert error.code == "safetensors_unreadable"
    assert peak < 2.5 * 30 * 2**20  # the bytes read (a bytearray, then bytes), not a parse


def test_a_16_mib_header_of_empty_objects_adds_no_parse(hub):
    body = b"{" + b"".join(b'"%07d":{},' % i for i in range(1_200_000)) + b'"x":{}}'
    assert 12 * 2**20 < len(body) <= 16 * 2**20
    hub.add("org/m", {"model.safetensors": len(body).to_bytes(8, "little") + body})
    error, peak = refused_with_peak(lambda: read_headers_here("org/m"))
    assert error.code == "safetensors_unreadable"
    assert peak < 3 * len(body)  # parsed, it would be ~268 MiB


@pytest.mark.parametrize("how", [{"trickle": 0.3, "huge": 10_000}, {"stall": 30}])
def test_a_slow_or_stalled_config_is_refused_within_the_deadline(hub, short_deadline, how):
    hub.add("org/m", {})
    hub.hostile["org/m/config.json"] = how
    error, seconds = refused(lambda: fetch_config("org/m"))
    assert error.code == "hub_too_slow"
    assert seconds <= short_deadline + 1
    assert f"{short_deadline} s" in error.message("en") and f"{short_deadline} s" in plain(error.message("fr"))


def test_slow_headers_are_refused_within_the_deadline(hub, short_deadline):
    hub.add("org/m", {})
    hub.hostile["org/m/model.safetensors.index.json"] = {"trickle": 0.3, "huge": 10_000}
    error, seconds = refused(lambda: read_headers_here("org/m"))
    assert error.code == "hub_too_slow" and seconds <= short_deadline + 1


def test_a_stalled_hub_is_not_paid_again_on_the_next_question(hub, short_deadline):
    hub.add("org/m", {})
    hub.hostile["org/m/config.json"] = {"stall": 30}
    first, _ = refused(lambda: seam.resolve("org/m", hub_id=True))
    again, seconds = refused(lambda: seam.resolve("org/m", hub_id=True))
    assert first.code == again.code == "hub_too_slow"
    assert seconds < 0.5 and hub.requests.count(f"GET {CONFIG}") == 1


def test_a_hub_failure_is_kept_half_a_minute_not_five(hub, monkeypatch, short_deadline):
    hub.add("org/m", {})
    hub.hostile["org/m/config.json"] = {"stall": 30}
    clock = [1000.0]
    monkeypatch.setattr(seam.time, "monotonic", lambda: clock[0])
    refused(lambda: seam.resolve("org/m", hub_id=True))
    del hub.hostile["org/m/config.json"]
    hub.add("org/m", {"config.json": load_test_config("tiny-llama")})
    clock[0] += seam.HUB_FAILURE_SECONDS + 1
    assert seam.resolve("org/m", hub_id=True).summary.parameters > 0


def test_a_redirect_to_another_host_is_not_followed():
    other = FakeHub()
    other.start()
    try:
        other.add("org/m", {"config.json": load_test_config("tiny-llama")})
        hub = FakeHub()
        hub.start()
        os.environ["HF_ENDPOINT"], saved = hub.url, os.environ.get("HF_ENDPOINT")
        try:
            hub.add("org/m", {})
            # 127.0.0.1 and localhost: the same machine, but not the Hub's host as named.
            hub.hostile["org/m/config.json"] = {"redirect": other.url.replace("127.0.0.1", "localhost") + CONFIG}
            error, _ = refused(lambda: fetch_config("org/m"))
        finally:
            os.environ["HF_ENDPOINT"] = saved or ""
            hub.stop()
    finally:
        other.stop()
    assert error.code == "hub_redirect" and "localhost" in error.message("en")
    assert other.requests == []


def test_a_redirect_on_the_hubs_own_host_is_followed(hub):
    hub.add("org/renamed", {"config.json": load_test_config("tiny-llama")})
    hub.add("org/m", {})
    hub.hostile["org/m/config.json"] = {"redirect": "/org/renamed/resolve/main/config.json"}
    assert fetch_config("org/m")["model_type"] == "llama"


@pytest.mark.parametrize("url,ok", [
    ("https://huggingface.co/org/m/resolve/main/x", True),
    ("https://cas-bridge.xethub.hf.co/xet/abc", True),
    ("https://cdn-lfs.huggingface.co/repos/abc", True),
    ("http://cdn-lfs.huggingface.co/repos/abc", False),  # the official Hub's CDNs over https only
    ("https://evilhuggingface.co/x", False),
    ("https://huggingface.co.evil.com/x", False),
    ("https://169.254.169.254/latest/meta-data", False),
    ("file:///etc/passwd", False),
])
def test_the_official_hub_redirects_only_to_its_own_domains(url, ok):
    assert redirect_allowed(url, hub_module.allowed_hosts("https://huggingface.co/org/m")) is ok


def test_the_cli_says_a_huge_config_on_one_line(hub):
    from tests.test_cli import cli

    hub.add("org/m", {})
    hub.hostile["org/m/config.json"] = {"huge": 300_000_000}
    out = cli("estimate", "org/m", env={"HF_ENDPOINT": hub.url})
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "2 MiB" in out.stderr


def test_choosing_to_read_headers_never_imports_transformers_here():
    """The model types transformers knows come from a build worker: importing transformers in
    the server (to see a config's type is unknown) cost it about 200 MiB for good."""
    import subprocess
    import sys

    script = ("import sys; from calculator.models.seam import header_count_reason; "
              "print(header_count_reason({'model_type': 'not-a-known-type'}), 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=hub_module.__file__.rsplit("/calculator/", 1)[0])
    assert out.stdout.split() == ["unknown_type", "False"], out.stderr[-500:]


@pytest.mark.parametrize("how", [{"head_trickle": 0.2}, {"chunk_trickle": 0.2}])
def test_trickled_headers_or_chunk_framing_are_refused_within_the_deadline(hub, short_deadline, how):
    """httpx's timeouts bound each read, and each of these reads is answered in time: only a
    deadline over every socket operation ends them."""
    hub.add("org/m", {})
    hub.hostile["org/m/config.json"] = how
    error, seconds = refused(lambda: fetch_config("org/m"))
    assert error.code == "hub_too_slow" and seconds <= short_deadline + 0.5


@pytest.mark.parametrize("how", [{"head_trickle": 0.2}, {"chunk_trickle": 0.2}])
def test_trickled_safetensors_headers_are_the_hubs_slowness_not_the_configs(hub, short_deadline, how):
    hub.add("org/m", {})
    hub.hostile["org/m/model.safetensors"] = how
    error, seconds = refused(lambda: read_headers_here("org/m"))
    assert error.code == "hub_too_slow" and seconds <= short_deadline + 0.5


def test_the_cli_answers_a_hub_trickling_its_headers_within_the_promised_time(hub):
    from tests.test_cli import cli

    hub.add("org/m", {})
    hub.hostile["org/m/config.json"] = {"head_trickle": 0.5}
    start = time.monotonic()
    out = cli("estimate", "org/m", env={"HF_ENDPOINT": hub.url})
    assert out.returncode == 2 and f"{hub_module.limit_seconds()} s" in out.stderr
    assert time.monotonic() - start < hub_module.limit_seconds() + 3  # the interpreter's start included


def test_the_token_goes_to_the_endpoints_origin_only(hub, monkeypatch):
    """A redirect to another port of the same host is another origin: it gets no token."""
    other = FakeHub()
    other.start()
    try:
        other.add("org/m", {"config.json": load_test_config("tiny-llama")})
        hub.add("org/m", {})
        hub.hostile["org/m/config.json"] = {"redirect": other.url + CONFIG}
        monkeypatch.setenv("HF_TOKEN", "hf_secret")
        assert fetch_config("org/m")["model_type"] == "llama"
    finally:
        other.stop()
    assert hub.authorizations == ["Bearer hf_secret"] and other.authorizations == [None]


def test_a_hub_read_sends_no_telemetry_and_writes_nothing_in_hf_home(hub):
    hub.add("org/m", {"config.json": load_test_config("tiny-llama")})
    fetch_config("org/m")
    assert hub.requests == [f"GET {CONFIG}"]  # no /api/agent-harnesses
    assert cache_files() == []
    assert all(agent == hub_module.hub_http.USER_AGENT for agent in hub.user_agents)


@pytest.mark.parametrize("url,same", [
    ("http://127.0.0.1:8000/x", True), ("http://127.0.0.1:8001/x", False), ("https://127.0.0.1:8000/x", False),
    ("https://huggingface.co/a", True), ("https://huggingface.co:443/b", True), ("https://cdn.hf.co/c", False),
    ("http://127.0.0.1:notaport/x", False),
])
def test_origins_compare_scheme_host_and_port(url, same):
    reference = "https://huggingface.co/org" if "huggingface" in url or "hf.co" in url else "http://127.0.0.1:8000/y"
    assert (hub_module.origin(url) == hub_module.origin(reference)) is same


def test_the_page_path_answers_trickled_headers_in_the_worker_within_the_deadline(hub, short_deadline):
    """The page resolves a Hub id with its headers read in a build worker: the worker's reads
    hold the same deadline, and the reader hears that the Hub was too slow, not that the
    config was too large to build."""
    hub.add("org/m", {})  # no config.json: the page reads the checkpoint's headers instead
    hub.hostile["org/m/model.safetensors"] = {"head_trickle": 0.2}
    error, seconds = refused(lambda: seam.resolve("org/m", hub_id=True, read_headers=True))
    assert error.code == "hub_too_slow", error.code
    assert seconds <= short_deadline + 1.5  # the worker keeps the question's deadline, its start included
