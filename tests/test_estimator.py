"""The estimator chapter through AppTest: every way to name a model (catalog, Hub id against
the local Hub server, offline Hub id, upload), the checks on what users send, and the
take-away forms (markdown equal to the table, CSV equal to the CLI, a link that reopens)."""

from __future__ import annotations

import csv
import io
import json
import re
from urllib.parse import parse_qsl, urlparse

import numpy as np
import pytest
from safetensors.numpy import save as save_numpy
import streamlit as st

from calculator.models import catalog
from calculator.models.meta import count_config
from calculator.core.units import format_bytes, format_count
from calculator.models.seam import MAX_UPLOAD_BYTES
from tests.apptest import open_page
from tests.conftest import load_test_config
from tests.cli_runner import run_cli  # in this process, where a test only reads the output
from tests.test_cli import cli

TINY = load_test_config("tiny-llama")


@pytest.fixture(autouse=True)
def fresh_page_caches():
    """Page caches outlive a run (that is their point): each test starts without them."""
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def estimator(lang: str = "en", **query):
    at = open_page("estimator", lang, **query)
    assert not at.exception, [e.value for e in at.exception]
    return at


def cells(at, which: str = "table") -> list[list[str]]:
    """The estimate table (the first dataframe) or the fit table (the second), as text."""
    frame = at.dataframe[0 if which == "table" else 1].value
    return [list(map(str, frame.columns))] + [list(map(str, row)) for row in frame.itertuples(index=False)]


def no_table(at) -> bool:
    """No estimate table: the only tables left are those of the accuracy section further down,
    which start with the kind of measurement."""
    from calculator.core.messages import text

    accuracy_first = {text("accuracy.col_kind", lang) for lang in ("en", "fr")}
    return all(d.value.columns[0] in accuracy_first for d in at.dataframe)


def markdown_export(at) -> str:
    return next(c.value for c in at.code if c.language == "markdown")


def errors(at) -> list[str]:
    return [e.value for e in at.error]


def upload(at, name: str, content: bytes, mime: str = "application/json"):
    at.get("file_uploader")[0].set_value((name, content, mime))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# --- catalog -------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "fr"])
def test_catalog_model_equals_the_cli(lang):
    at = estimator(lang, es_model="mistralai/Mixtral-8x7B-v0.1", es_dtypes=["float32", "int4"])
    data = json.loads(run_cli("estimate", "mixtral-8x7b-v0.1", "--dtypes", "float32", "int4", "--json").stdout)
    rows = cells(at)[1:]
    assert [row[0] for row in rows] == ["float32", "int4"]
    for row, expected in zip(rows, data["rows"]):
        assert row[2] == format_bytes(expected["total_bytes"], lang)
        assert row[3] == format_bytes(expected["rule_of_thumb_bytes"], lang)
        assert row[1] == f"{format_bytes(expected['largest_layer_bytes'], lang)} ({expected['largest_layer']})"
    metrics = [m.value for m in at.metric]
    assert format_count(data["parameters"], lang) in metrics and format_count(data["active_parameters"], lang) in metrics


def test_markdown_export_is_the_table_shown():
    at = estimator("fr", es_model="google-bert/bert-base-cased", es_base="true")
    exported = markdown_export(at)
    table = [line for line in exported.splitlines() if line.startswith("|")]
    parsed = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table]
    assert parsed[0] == cells(at)[0] and parsed[2:] == cells(at)[1:] and set(parsed[1]) == {"---"}
    assert "google-bert/bert-base-cased" in exported and "108 310 272" in exported.replace("\u202f", " ")
    assert "413,18 Mio" in exported.replace("\u202f", " ")  # accelerate's figure for this model, in its real unit


def test_csv_holds_the_cli_rows():
    from calculator.memory.estimate import rows_for
    from calculator.models.seam import resolve
    from guide.inputs.estimate_table import to_csv

    at = estimator(es_model="openai-community/gpt2", es_dtypes=["float32", "bfloat16", "int4"])
    button = at.get("download_button")[0]
    assert button.proto.label == "Download CSV" and button.proto.url.endswith(".csv")
    # The bytes served are what to_csv makes of the model and the precisions on the page.
    model = resolve("gpt2")
    text = to_csv(model.name, model.summary, rows_for(model.summary, ["float32", "bfloat16", "int4"]))
    data = json.loads(run_cli("estimate", "gpt2", "--dtypes", "float32", "bfloat16", "int4", "--json").stdout)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["dtype"] for r in rows] == ["float32", "bfloat16", "int4"]
    for row, expected in zip(rows, data["rows"]):
        for key in ("total_bytes", "largest_layer_bytes", "rule_of_thumb_bytes"):
            assert int(row[key]) == expected[key]
        assert row["largest_layer"] == expected["largest_layer"]
        assert float(row["bytes_per_param"]) == expected["bytes_per_param"]
        assert row["training_adam_bytes"] == ("" if expected["training_adam_bytes"] is None
                                              else str(expected["training_adam_bytes"]))
    assert rows[0]["parameters"] == str(data["parameters"]) == "124439808"


def test_base_class_counts_what_accelerate_counts():
    auto = estimator(es_model="meta-llama/Meta-Llama-3-8B")
    base = estimator(es_model="meta-llama/Meta-Llama-3-8B", es_base="true")
    assert "8,030,261,248" in [m.value for m in auto.metric]
    assert "7,504,924,672" in [m.value for m in base.metric]
    assert cells(base)[1][2] == "27.96 GiB"  # accelerate prints this as "27.96 GB"


def test_no_precision_chosen_says_so():
    at = estimator(es_dtypes="")
    assert at.info and no_table(at)


def test_gpus_chosen_appear_in_the_fit_table():
    at = estimator(es_model="meta-llama/Llama-3.1-405B", es_gpus=["NVIDIA H200 SXM", "AMD Instinct MI300X"],
                   es_dtypes=["bfloat16", "int4"])
    fits = cells(at, "fits")
    assert fits[0][1:] == ["NVIDIA H200 SXM", "AMD Instinct MI300X"]
    # int4 on the MI300X (196,592 MiB = 191.98 GiB): 188.99 GiB of weights fit, the x1.1 rule
    # (207.89 GiB) does not, so it is tight.
    assert [row[1:] for row in fits[1:]] == [["✗ too big", "✗ too big"], ["✗ too big", "~ tight"]]


def test_picking_a_catalog_model_wins_over_an_old_hub_id_link(hub):
    # links from before the case put a Hub id in es_hub; the calculator's model picker now
    # takes catalog names and Hub ids alike, and what the reader picks there wins
    hub.add("org/tiny", {"config.json": TINY})
    at = estimator(es_hub="org/tiny")
    tiny = count_config(TINY).parameters
    assert format_count(tiny) in [m.value for m in at.metric]
    at.selectbox(key="es_model").set_value("openai-community/gpt2").run()
    assert "124,439,808" in [m.value for m in at.metric]


# --- Hub ids --------------------------------------------------------------------------------

def test_hub_id_is_counted_from_its_config(hub):
    hub.add("someone/tiny-llama", {"config.json": TINY})
    at = estimator("fr", es_hub="someone/tiny-llama", es_dtypes=["bfloat16"])
    data = json.loads(cli("estimate", "someone/tiny-llama", "--dtypes", "bfloat16", "--json",
                          env={"HF_ENDPOINT": hub.url}).stdout)
    assert cells(at)[1][2] == format_bytes(data["rows"][0]["total_bytes"], "fr")
    assert not errors(at)
    assert any("/someone/tiny-llama/resolve/main/config.json" in r for r in hub.requests)
    asked = len(hub.requests)
    at.checkbox(key="es_base").check().run()  # another class: counted again, config from cache
    at.checkbox(key="es_base").uncheck().run()
    assert len(hub.requests) == asked


def test_a_catalog_id_typed_as_hub_id_makes_no_request(hub):
    at = estimator(es_hub="Qwen/Qwen3-30B-A3B")
    assert hub.requests == []
    assert format_count(catalog.stored_summary("qwen3-30b-a3b").parameters) in [m.value for m in at.metric]


@pytest.mark.parametrize("lang,word", [("en", "connection was refused"), ("fr", "connexion a été refusée")])
def test_offline_hub_id_is_a_clear_translated_error(monkeypatch, lang, word):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    at = estimator(lang, es_hub="someone/not-cached")
    assert len(errors(at)) == 1 and word in errors(at)[0]
    assert no_table(at)


def test_an_unreachable_hub_is_asked_again_on_the_next_run(hub, monkeypatch):
    hub.add("someone/back-online", {"config.json": TINY})
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    at = estimator(es_hub="someone/back-online")
    assert errors(at) and no_table(at)
    # The Hub is back (here at another address: another cache key; the same address is asked
    # again after HUB_FAILURE_SECONDS, tests/test_hostile_hub.py).
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    at.run()
    assert not errors(at) and cells(at)[1][0] == "float32"


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "tests/configs/tiny-llama.json",
                                  "org/<img src=x onerror=alert(1)>"])
def test_bad_hub_ids_and_server_paths_make_no_request(hub, name):
    at = estimator(es_hub=name)
    assert hub.requests == []
    assert len(errors(at)) == 1 and "not a valid Hub id" in errors(at)[0]
    assert not re.search(r"(?<!\\)<img", errors(at)[0])


def test_an_existing_server_path_is_never_read(hub):
    # "calculator" is a folder of the server; as a Hub id it is a repository name, asked of the Hub.
    at = estimator(es_hub="calculator")
    assert errors(at) and any("/calculator/resolve/main/config.json" in r for r in hub.requests)


def _headers_repo(hub, repo: str, config: dict | None):
    tensors = {
        "model.embed_tokens.weight": np.zeros((1000, 64), np.float16),
        "model.layers.0.mlp.up_proj.weight": np.zeros((172, 64), np.float16),
        "model.layers.1.mlp.up_proj.weight": np.zeros((172, 64), np.float16),
        "lm_head.weight": np.zeros((1000, 64), np.float16),
    }
    files = {"model.safetensors": save_numpy(tensors)}
    if config is not None:
        files["config.json"] = config
    hub.add(repo, files)
    return sum(t.size for t in tensors.values())


def test_remote_code_checkpoint_is_counted_from_its_headers_without_running_code(hub):
    config = {"model_type": "acme_lm", "architectures": ["AcmeForCausalLM"], "hidden_size": 64,
              "auto_map": {"AutoModelForCausalLM": "modeling_acme.AcmeForCausalLM"}}
    elements = _headers_repo(hub, "acme/lm", config)
    hub.repos["acme/lm"]["modeling_acme.py"] = b"raise SystemExit('remote code ran')\n"
    at = estimator(es_hub="acme/lm", es_dtypes=["float16"])
    assert format_count(elements) in [m.value for m in at.metric]
    assert cells(at)[1][2] == format_bytes(2 * elements)
    assert any("own repository" in i.value for i in at.info)
    assert not any("modeling_acme" in r for r in hub.requests)


def test_remote_code_without_safetensors_says_both_halves(hub):
    hub.add("acme/bin-only", {"config.json": {"model_type": "acme_lm", "auto_map": {"AutoModel": "m.M"}},
                              "pytorch_model.bin": b"\0" * 32})
    at = estimator("fr", es_hub="acme/bin-only")
    assert len(errors(at)) == 1 and "code" in errors(at)[0] and "safetensors" in errors(at)[0]


def test_quantized_checkpoint_shows_the_model_and_what_is_stored(hub):
    config = {**TINY, "quantization_config": {"quant_method": "gptq", "bits": 4}}
    hub.add("org/tiny-gptq", {"config.json": config, "model.safetensors": save_numpy({
        "model.layers.0.mlp.up_proj.qweight": np.zeros((8, 172), np.int32),
        "model.layers.0.mlp.up_proj.scales": np.zeros((2, 172), np.float16)})})
    at = estimator(es_hub="org/tiny-gptq")
    assert at.warning and "int32" in at.warning[0].value
    assert any("I32" in m.value for m in at.markdown)
    assert cells(at)[1][0] == "float32"  # the table: the model the config describes


# --- uploads --------------------------------------------------------------------------------

def test_uploaded_config_is_counted_and_equals_the_cli(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    data = json.loads(run_cli("estimate", str(path), "--json").stdout)
    at = upload(estimator(), "config.json", json.dumps(TINY).encode())
    assert [row[2] for row in cells(at)[1:]] == [format_bytes(r["total_bytes"]) for r in data["rows"]]
    assert any("your file" in m.value for m in at.markdown)
    notes = [w.value for w in at.warning]
    assert any("cannot travel in a link" in n for n in notes)


def test_uploaded_405b_config_equals_the_catalog_count():
    raw = catalog.CONFIG_DIR.joinpath("llama-3.1-405b.json").read_bytes()
    at = upload(estimator(es_dtypes=["bfloat16"]), "config.json", raw)
    stored = catalog.stored_summary("llama-3.1-405b")
    assert format_count(stored.parameters) in [m.value for m in at.metric]
    assert cells(at)[1][2] == format_bytes(stored.total_bytes_at("bfloat16"))


BAD_UPLOADS = [
    ("config.json", b"{not json", "config_not_json"),
    ("config.json", b"[1, 2, 3]", "config_not_object"),
    ("config.json", b"\xff\xfe\x00garbage", "config_not_text"),
    ("model.bin", b"{}", "upload_not_json_name"),
    ("config.json", b"{" + b" " * (MAX_UPLOAD_BYTES + 10) + b"}", "upload_too_large"),
    ("config.json", json.dumps({"model_type": "llama", "num_hidden_layers": 10**6}).encode(), "config_bad_value"),
    ("config.json", json.dumps({**TINY, "hidden_size": 262144, "intermediate_size": 262144,
                                "num_hidden_layers": 512, "vocab_size": 8_000_000}).encode(), "config_absurd"),
    ("config.json", json.dumps({"model_type": "acme_lm", "auto_map": {"AutoModel": "m.M"}}).encode(), "needs_remote_code"),
    ("config.json", json.dumps({"hidden_size": 64}).encode(), "config_no_model_type"),
]


@pytest.mark.parametrize("lang", ["en", "fr"])
@pytest.mark.parametrize("name,content,code", BAD_UPLOADS, ids=[c for _, _, c in BAD_UPLOADS])
def test_bad_uploads_are_refused_clearly(name, content, code, lang):
    from calculator.core.messages import text

    at = upload(estimator(lang), name, content)
    shown = errors(at)
    assert len(shown) == 1
    # The message of that error in that language, whatever its {placeholders} hold (French
    # typography puts no-break spaces around a filled-in number: compared as plain spaces).
    def spaces(message):
        return re.sub("[\u202f\u00a0]", " ", message)

    template = spaces(text(f"error.{code}", lang).replace("{{", "{").replace("}}", "}"))
    pattern = ".*".join(re.escape(part) for part in re.split(r"\{[a-z_]+\}", template))
    assert re.fullmatch(pattern, spaces(shown[0].replace("\\", "")), re.DOTALL), shown[0]
    if code == "upload_too_large":  # the sizes as the reader's language writes numbers
        assert ("1\u202f000\u202f000" if lang == "fr" else "1,000,000") in shown[0]  # the server's maxUploadSize
    assert no_table(at)


def test_an_uploaded_name_is_shown_as_text_never_markup():
    at = upload(estimator(), "<img src=x onerror=alert(1)>[x](javascript:alert(1)).json", json.dumps(TINY).encode())
    visible = "\n".join(m.value for m in at.markdown)
    # Every markdown-active character of the name is escaped: no tag, no link.
    assert "\\<img src=x onerror=alert\\(1\\)\\>\\[x\\]\\(javascript" in visible
    assert not re.search(r"(?<!\\)<img", visible) and not re.search(r"(?<!\\)\]\(javascript", visible)


# --- the link -------------------------------------------------------------------------------

def test_the_share_link_reopens_the_same_estimate():
    query = {"es_model": "Qwen/Qwen2.5-7B", "es_dtypes": ["float16", "int8"], "es_base": "true",
             "es_gpus": ["NVIDIA L4"]}
    at = estimator("fr", **query)
    link = next(c.value for c in at.code if c.value.startswith("http") and "es_model" in c.value)
    assert link.endswith("#estimate") and "lang=fr" in link
    pairs = parse_qsl(urlparse(link).query)
    again = {}
    for key, value in pairs:
        again.setdefault(key, []).append(value)
    reopened = estimator(again.pop("lang")[0], **{k: v if len(v) > 1 else v[0] for k, v in again.items()})
    assert cells(reopened) == cells(at) and cells(reopened, "fits") == cells(at, "fits")
