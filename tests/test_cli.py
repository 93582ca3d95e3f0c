"""The CLI contract: tables with units, JSON in bytes with stable keys, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.cli_runner import run_cli
from tests.conftest import CONFIGS, ROOT

ROW_KEYS = {"dtype", "bytes_per_param", "total_bytes", "largest_layer", "largest_layer_bytes",
            "training_adam_bytes", "rule_of_thumb_bytes", "reserved_bytes", "nvidia_smi_bytes"}
# With --gpu, each row also says whether that precision loads on the card.
GPU_ROW_KEYS = ROW_KEYS | {"verdict", "fits", "usable_bytes", "headroom_bytes"}
TOP_KEYS = {"model", "source", "architecture", "model_class", "parameters", "buffers_bytes", "rows"}


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command as a real process: its exit status and what reaches stderr (no traceback).
    Other test files import it with their own environment."""
    return subprocess.run([sys.executable, "-m", "calculator", *args], cwd=ROOT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=120)


def cli_here(*args: str) -> subprocess.CompletedProcess:
    """The command run in this process (tests/cli_runner.py): what it prints."""
    return run_cli(*args)


def test_estimate_table_names_its_units():
    out = cli_here("estimate", "llama-2-7b")
    assert out.returncode == 0, out.stderr
    assert "6,738,415,616" in out.stdout
    assert "GiB" in out.stdout and "2^30 bytes" in out.stdout
    for dtype in ("float32", "bfloat16", "int8", "int4"):
        assert dtype in out.stdout


def test_estimate_json_contract():
    out = cli_here("estimate", "bert-base-cased", "--model-class", "base", "--dtypes", "float32", "float16", "--json")
    data = json.loads(out.stdout)
    assert TOP_KEYS <= set(data)
    assert data["source"] == "catalog" and data["model_class"] == "base"
    assert [set(row) for row in data["rows"]] == [ROW_KEYS, ROW_KEYS]
    fp32, fp16 = data["rows"]
    assert fp32["total_bytes"] == 433_249_280
    # float16: parameters halve, the int64 buffers keep their 8,192 bytes.
    assert fp16["total_bytes"] == (433_249_280 - 8192) // 2 + 8192
    assert fp32["rule_of_thumb_bytes"] == round(108_310_272 * 4 * 1.1)
    assert fp32["training_adam_bytes"] == 4 * 433_249_280
    assert all(isinstance(row["total_bytes"], int) for row in data["rows"])


def test_int_dtypes_have_no_accelerate_training_figure():
    rows = json.loads(cli_here("estimate", "gpt2", "--dtypes", "int8", "int4", "--json").stdout)["rows"]
    assert [row["training_adam_bytes"] for row in rows] == [None, None]
    assert rows[1]["total_bytes"] == 124_439_808 // 2


def test_local_config_file_and_folder(tmp_path):
    target = tmp_path / "tiny"
    target.mkdir()
    (target / "config.json").write_text((CONFIGS / "tiny-llama.json").read_text())
    by_folder = json.loads(cli_here("estimate", str(target), "--json").stdout)
    by_file = json.loads(cli_here("estimate", str(target / "config.json"), "--json").stdout)
    assert by_folder["source"] == by_file["source"] == "local"
    assert by_folder["parameters"] == by_file["parameters"] > 0


def test_catalog_command_lists_every_model():
    data = json.loads(cli_here("catalog", "--json").stdout)
    assert len(data["models"]) >= 25
    assert {"name", "id", "parameters"} <= set(data["models"][0])
    table = cli_here("catalog").stdout
    assert "meta-llama/Llama-2-7b-hf" in table


@pytest.mark.parametrize("args", [
    ("estimate", "/no/such/file.json"),
    ("estimate", "gpt2", "--dtypes", "float64"),
    ("estimate", "gpt2", "--model-class", "weird"),
    ("estimate",),
    ("frobnicate",),
    (),
    ("estimate", "not a model id!"),
    ("estimate", "some-org/some-model"),  # Hub unreachable in tests
])
def test_bad_input_is_one_line_and_exit_code_2(args):
    out = cli(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")


@pytest.mark.parametrize("content,expected", [
    ("{oops", "not valid JSON"),
    ('{"hidden_size": 4}', "model_type"),
    ('{"model_type": "llama", "num_hidden_layers": 10000000}', "num_hidden_layers"),
    ('{"model_type": "custom_thing", "auto_map": {"AutoConfig": "a.B"}}', "--trust-remote-code"),
    ('{"model_type": "nope"}', "does not know"),
])
def test_bad_local_configs(tmp_path, content, expected):
    path = tmp_path / "config.json"
    path.write_text(content)
    out = cli_here("estimate", str(path))
    assert out.returncode == 2 and expected in out.stderr and "Traceback" not in out.stderr


def test_trust_remote_code_runs_a_local_repositorys_code(tmp_path):
    """Only when asked: a folder with its own modeling code, as a Hub repository has."""
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "toy_mlp", "architectures": ["ToyModel"], "width": 8,
        "auto_map": {"AutoConfig": "modeling_toy.ToyConfig", "AutoModel": "modeling_toy.ToyModel"},
    }))
    (tmp_path / "modeling_toy.py").write_text(
        "import torch\nfrom transformers import PretrainedConfig, PreTrainedModel\n"
        "class ToyConfig(PretrainedConfig):\n    model_type = 'toy_mlp'\n"
        "    def __init__(self, width=8, **kw):\n        self.width = width\n        super().__init__(**kw)\n"
        "class ToyModel(PreTrainedModel):\n    config_class = ToyConfig\n"
        "    def __init__(self, config):\n        super().__init__(config)\n"
        "        self.proj = torch.nn.Linear(config.width, config.width)\n        self.post_init()\n"
    )
    refused = cli_here("estimate", str(tmp_path))
    assert refused.returncode == 2 and "--trust-remote-code" in refused.stderr
    # a real process: the repository's code is imported by whoever builds the model
    accepted = cli("estimate", str(tmp_path), "--trust-remote-code", "--json")
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["parameters"] == 8 * 8 + 8
