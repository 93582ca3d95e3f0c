"""Reading a transformers config safely: parse, check every size, refuse the absurd early.

Nothing here builds a model. The checks run in microseconds, so a config asking for ten
million layers is refused before torch is even imported.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import CalculatorError
from .families import EXPERT_COUNT_KEYS, EXPERT_TOPK_KEYS

MAX_CONFIG_BYTES = 2 * 1024 * 1024  # real configs, id2label tables included, stay far below
MAX_NESTING = 24
# Above this many parameters (a rough count from the config) we refuse to build: the largest
# open models have about 1 trillion.
MAX_ROUGH_PARAMETERS = 5 * 10**12

# Size fields of transformers configs and the largest value we accept for each group.
LAYER_KEYS = {
    "num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_decoder_layers",
    "num_encoder_layers", "encoder_layers", "decoder_layers",
}
WIDTH_KEYS = {
    "hidden_size", "n_embd", "d_model", "dim", "embed_dim", "word_embed_proj_dim",
    "intermediate_size", "n_inner", "d_ff", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim",
    "hidden_dim", "moe_intermediate_size", "shared_expert_intermediate_size", "d_kv",
    "head_dim", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
    "v_head_dim", "projection_dim",
}
HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "dim", "embed_dim")
DENSE_FFN_KEYS = ("intermediate_size", "n_inner", "d_ff", "ffn_dim", "encoder_ffn_dim",
                  "decoder_ffn_dim", "hidden_dim")
HEAD_KEYS = {
    "num_attention_heads", "n_head", "num_heads", "n_heads", "num_key_value_heads",
    "encoder_attention_heads", "decoder_attention_heads", "multi_query_group_num",
}
EXPERT_KEYS = {*EXPERT_COUNT_KEYS, *EXPERT_TOPK_KEYS, "n_shared_experts"}
VOCAB_KEYS = {"vocab_size"}
POSITION_KEYS = {"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length"}
IMAGE_KEYS = {"image_size", "patch_size", "num_channels"}

LIMITS: dict[str, tuple[set[str], int, int]] = {
    # group: (keys, smallest, largest)
    "layers": (LAYER_KEYS, 1, 512),
    "width": (WIDTH_KEYS, 1, 262_144),
    "heads": (HEAD_KEYS, 1, 4096),
    "experts": (EXPERT_KEYS, 0, 4096),
    "vocab": (VOCAB_KEYS, 1, 8_388_608),
    "token_types": ({"type_vocab_size"}, 0, 1024),
    "positions": (POSITION_KEYS, 1, 16_777_216),
    "image": (IMAGE_KEYS, 1, 65_536),
}
_LIMIT_OF_KEY = {key: (low, high) for keys, low, high in LIMITS.values() for key in keys}
MAX_LABELS = 1_000_000


def parse_config_text(raw: bytes | str, name: str = "config.json") -> dict:
    """Parse a config file's text into a dict, or say clearly why it cannot be one."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", errors="replace")
    if len(raw) > MAX_CONFIG_BYTES:
        raise CalculatorError("config_too_large", name=name, limit_mib=MAX_CONFIG_BYTES // 2**20)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CalculatorError("config_not_text", name=name) from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise CalculatorError("config_too_nested", name=name, limit=MAX_NESTING) from None
    except ValueError as exc:
        detail = getattr(exc, "msg", "invalid JSON")
        line = getattr(exc, "lineno", "?")
        raise CalculatorError("config_not_json", name=name, detail=detail, line=line) from None
    if not isinstance(data, dict):
        raise CalculatorError("config_not_object", name=name, kind=type(data).__name__)
    return data


def read_config_file(path: str | Path) -> tuple[dict, Path]:
    """A config from a path to config.json or to the folder that holds one (CLI only)."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise CalculatorError("config_missing_in_folder", path=path.parent)
    if not path.is_file():
        raise CalculatorError("config_file_missing", path=path)
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise CalculatorError("config_too_large", name=path.name, limit_mib=MAX_CONFIG_BYTES // 2**20)
        raw = path.read_bytes()
    except OSError as exc:
        raise CalculatorError("config_unreadable", path=path, detail=exc.strerror or exc) from None
    return parse_config_text(raw, name=str(path)), path


def check_config(config: dict) -> None:
    """Refuse configs that cannot describe a model we should build: no model_type, sizes of
    the wrong type, negative or absurd sizes. Cheap: no import of torch or transformers."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type.strip():
        raise CalculatorError("config_no_model_type")
    architectures = config.get("architectures")
    if architectures is not None and not (isinstance(architectures, list)
                                          and all(isinstance(a, str) for a in architectures)):
        raise CalculatorError("config_bad_architectures", value=_show(architectures))
    if config.get("auto_map") is not None and not isinstance(config.get("auto_map"), dict):
        raise CalculatorError("config_bad_auto_map", value=_show(config["auto_map"]))
    _check_values(config, depth=0)
    rough = rough_parameter_count(config)
    if rough > MAX_ROUGH_PARAMETERS:
        raise CalculatorError("config_absurd", rough=f"{rough:.3g}", limit=f"{MAX_ROUGH_PARAMETERS:.0e}")


def _check_values(table: dict, depth: int) -> None:
    if depth > MAX_NESTING:
        raise CalculatorError("config_too_nested", name="config.json", limit=MAX_NESTING)
    for key, value in table.items():
        if key in _LIMIT_OF_KEY and value is not None:
            low, high = _LIMIT_OF_KEY[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise CalculatorError("config_bad_value", key=key, value=_show(value), low=low, high=high)
        elif isinstance(value, dict):
            if key in ("id2label", "label2id"):
                if len(value) > MAX_LABELS:
                    raise CalculatorError("config_bad_value", key=key, value=len(value), low=0, high=MAX_LABELS)
                continue
            _check_values(value, depth + 1)
        elif isinstance(value, list):
            _check_list(key, value, depth + 1)


def _check_list(key: str, values: list, depth: int) -> None:
    if depth > MAX_NESTING:
        raise CalculatorError("config_too_nested", name="config.json", limit=MAX_NESTING)
    for item in values:
        if isinstance(item, dict):
            _check_values(item, depth + 1)
        elif isinstance(item, list):
            _check_list(key, item, depth + 1)


def _show(value: object) -> str:
    try:
        shown = json.dumps(value, ensure_ascii=True) if not isinstance(value, str) else repr(value)
    except (TypeError, ValueError):
        shown = type(value).__name__
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _largest(table: dict, keys) -> int:
    values = [table.get(key) for key in keys]
    return max([v for v in values if isinstance(v, int) and not isinstance(v, bool)] or [0])


def rough_parameter_count(config: dict) -> float:
    """An upper-bound guess of the parameter count from the headline sizes, summed over the
    config and its sub-configs (text, vision, encoder, decoder). Only used to refuse."""
    total = 0.0
    for table in _tables(config, depth=0):
        layers = sum(v for k, v in table.items() if k in LAYER_KEYS and isinstance(v, int) and not isinstance(v, bool))
        hidden = _largest(table, HIDDEN_KEYS)
        ffn = max(_largest(table, DENSE_FFN_KEYS), 4 * hidden)
        expert_ffn = _largest(table, ("moe_intermediate_size",)) or ffn
        experts = _largest(table, EXPERT_COUNT_KEYS)
        vocab = _largest(table, VOCAB_KEYS)
        positions = _largest(table, POSITION_KEYS)
        total += layers * (4.0 * hidden * hidden + 3.0 * hidden * (ffn + expert_ffn * experts))
        total += (2.0 * vocab + positions) * hidden
    return total


def _tables(table: dict, depth: int):
    yield table
    if depth < 3:
        for value in table.values():
            if isinstance(value, dict):
                yield from _tables(value, depth + 1)
