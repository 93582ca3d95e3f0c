"""Edges of the CLI a hostile probe found: a deeply nested result file, and a config file
named beside another config.json with --trust-remote-code."""

from __future__ import annotations

import json

from tests.test_cli import cli

TOY_CODE = (
    "import torch\nfrom transformers import PretrainedConfig, PreTrainedModel\n"
    "class ToyConfig(PretrainedConfig):\n    model_type = 'toy_mlp'\n"
    "    def __init__(self, width=8, **kw):\n        self.width = width\n        super().__init__(**kw)\n"
    "class ToyModel(PreTrainedModel):\n    config_class = ToyConfig\n"
    "    def __init__(self, config):\n        super().__init__(config)\n"
    "        self.proj = torch.nn.Linear(config.width, config.width)\n        self.post_init()\n"
)


def toy(width: int) -> str:
    return json.dumps({"model_type": "toy_mlp", "architectures": ["ToyModel"], "width": width,
                       "auto_map": {"AutoConfig": "modeling_toy.ToyConfig", "AutoModel": "modeling_toy.ToyModel"}})


def test_trust_remote_code_builds_the_file_named_not_the_folders_config(tmp_path):
    (tmp_path / "modeling_toy.py").write_text(TOY_CODE)
    (tmp_path / "config.json").write_text(toy(4))
    (tmp_path / "x.json").write_text(toy(16))
    out = cli("estimate", str(tmp_path / "x.json"), "--trust-remote-code", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["parameters"] == 16 * 16 + 16  # x.json's width, by hand
    folder = cli("estimate", str(tmp_path), "--trust-remote-code", "--json")
    assert json.loads(folder.stdout)["parameters"] == 4 * 4 + 4  # the folder: its config.json


def test_a_deeply_nested_result_file_is_skipped_not_a_traceback(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "huge.json").write_bytes(b" " * (17 * 2**20))
    out = cli("accuracy", "--results", str(tmp_path))
    assert "Traceback" not in out.stderr and "RecursionError" not in out.stderr
    assert out.returncode in (0, 2) and out.stderr.count("\n") <= 1
