"""Reading a transformers config safely: parse, check every size, refuse the absurd early.

Nothing here builds a model. The checks run in microseconds, so a config asking for ten
million layers is refused before torch is even imported.
"""

from __future__ import annotations

import json
from pathlib import Path
import re

from calculator.core.errors import CalculatorError, Grouped
from calculator.core.reasons import json_kind, json_reason, os_reason, shown_path
from calculator.models.families import EXPERT_COUNT_KEYS, EXPERT_TOPK_KEYS

MAX_CONFIG_BYTES = 2 * 1024 * 1024  # real configs, id2label tables included, stay far below
MAX_NESTING = 24
# Above this many parameters (a rough count from the config) we refuse to build: the largest
# open models have about 1 trillion.
MAX_ROUGH_PARAMETERS = 5 * 10**12

# Size fields of transformers configs and the largest value we accept for each group: the
# headline keys, named here because the rough parameter count reads them.
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
LABEL_KEYS = {"num_labels"}
# A classification head has one output per label, and transformers makes an id2label table of
# that many entries: 100,000 labels cost about 1.3 s and 70 MB to build, 10^8 would cost 20 GB.
# An id2label that fits in a config file (2 MiB) holds fewer than 100,000 entries anyway.
MAX_LABELS = 100_000
MAX_LAYERS = 512
# A list of layer counts (Swin's depths, ConvNeXt's stages) adds up to at most this many layers.
MAX_LAYERS_IN_A_LIST = 2 * MAX_LAYERS

LIMITS: dict[str, tuple[set[str], int, int]] = {
    # group: (headline keys, smallest, largest)
    "layers": (LAYER_KEYS, 1, MAX_LAYERS),
    "width": (WIDTH_KEYS, 0, 262_144),
    "heads": (HEAD_KEYS, 1, 4096),
    "experts": (EXPERT_KEYS, 0, 65_536),  # Doge's product-key memory has 16,384 small experts
    "vocab": (VOCAB_KEYS, 1, 8_388_608),
    "token_types": ({"type_vocab_size"}, 0, 1024),
    "positions": (POSITION_KEYS, 1, 16_777_216),
    "image": (IMAGE_KEYS, 1, 65_536),
    "labels": (LABEL_KEYS, 0, MAX_LABELS),
}
_LIMIT_OF_KEY = {key: (low, high) for keys, low, high in LIMITS.values() for key in keys}

# Every other size key a transformers config may carry is recognised by its name, so that
# `depth` (22 vision model types), `depths` (35), `num_blocks`, `hidden_sizes` or
# `encoder_hidden_sizes` are held to the bounds of their group, in any model type and in
# sub-configs. The patterns come from the names transformers' own config classes use:
# tests/test_config_keys.py scans every config class of the installed transformers (the
# integer parameters of their __init__ and their attribute_map aliases), checks that each one
# is either classified here or knowingly left alone, and that every default passes. Keys that
# are not sizes (token ids, indices, rates, seeds, a single layer's index such as
# vision_feature_layer) are matched first and left alone. The lower bound of a recognised key
# is -1: configs use 0 to turn a part off and -1 for "none".
NOT_SIZE_PATTERN = re.compile(
    r"(^|_)(ids?|idx|index|indices|indexes|offset|seed|rate|rates|ratio|ratios|factor|factors|"
    r"scale|scaling|temperature|eps|epsilon|dropout|prob|probs|coefficient|cost|alpha|beta|gamma|"
    r"threshold|thresh|steps|step|stride|strides|multiple_of|divisor|divisible_by|period|interval|"
    r"every|frequency|pad|padding|top_k|topk|k|nms_radius|length_per_tok|bins|mult|multiplier|"
    r"delay|timescale|distance|extent|sample_rate|sampling_rate|seconds|per_second|hop_length|"
    r"max_period|keep_alive|tp|parallel_size|num_beams|beams|min_masks|new_tokens|tokens_per_second|"
    r"expansion|embedding_base|model_base|coefficient|ignore_index|hidden_layer)$"
    r"|token_id|_id_|^id$|_index_|^seed|^eval_|^rescale|_alpha|_beta|^(max|min)_depth$|feature_layers$"
    # lists of layer indices or per-layer flags (Llama 4's moe_layers, no_rope_layers; Qwen3-MoE's)
    r"|^(moe|no_rope|mlp_only)_layers$"
)
SIZE_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("labels", re.compile(r"(^|_)(labels|classes)$")),
    ("experts", re.compile(r"experts?(_per_tok(en)?|_num)?$|^n_routed|^moe_(num|top|k$)|expert_capacity$|^num_experts")),
    ("layers", re.compile(r"(^|_)(layers|depths?|blocks|stages|groups_of_layers|repeats|loops|passes|cycles|"
                          r"block_sizes|recurrent_loops|hidden_groups|block_repeats)$|^n_layer|_layers_|^num_.*layers|^blocks_per")),
    ("heads", re.compile(r"(^|_)heads?$|^n_head|_heads_|^heads_per")),
    ("vocab", re.compile(r"vocab|(^|_)(num_embeddings|n_token|n_words|codebook_size|num_codevectors_per_group|"
                         r"num_buckets|num_hash_buckets|position_buckets)$")),
    ("positions", re.compile(r"position|(^|_)(seq_len|seq_length|max_len|max_length|ctx|context_length|"
                             r"context_size|window|window_size|window_len|sliding_window|chunk_size|chunk_length|"
                             r"cache_size|mem_len|n_window|max_seq|sequence_length|seq|horizon_length|"
                             r"prediction_length|context|text_len|max_tokens|num_frames|frames|chunksize)$|max_.{0,80}(len|length|tokens|embeddings)$")),
    ("image", re.compile(r"(^|_)(image_size|img_size|patch_size|patch_sizes|crop_size|resolution|pretrain_image_size)$")),
    ("width", re.compile(r"(^|_)(size|sizes|dim|dims|channels?|width|features|units|rank|d_model|d_ff|d_kv|"
                         r"d_inner|dff|n_embd|n_inner|d_head|d_latents|d_rel|inner|hidden|emb|embd|embed|"
                         r"planes|inplanes|latents|filters|codebooks|quantizers|num_queries|prototypes|"
                         r"centroids|clusters|landmarks|registers|tokens|feedforward|d_state|d_ssm|dimension)$|_dim_|_size_|"
                         r"^dim_|^num_")),
)
# The longest size key of transformers' config classes has 43 characters (tests/test_config_keys.py
# scans them); a key past this is nobody's size and is not matched at all. Each pattern above is
# linear in its key anyway (no unbounded repeat that can restart at every character).
MAX_SIZE_KEY_CHARS = 100
# A recognised key may be -1 ("none", "from the end"); auxiliary vocabularies (hashed n-gram
# tables) may be larger than the main one.
_LIMIT_OF_GROUP = {group: (-1, high) for group, (_, _low, high) in LIMITS.items()} | {"vocab": (-1, 2**25)}
# Attention and expert implementations are chosen at load time (from_pretrained's
# attn_implementation), never by a config we are given: one may name a kernel repository on
# the Hub ("kernels-community/..."), which transformers would download and run.
RUNTIME_KEY_PATTERN = re.compile(r"implementation|^use_kernels$|^kernel_config$", re.IGNORECASE)


def size_group(key: str) -> str | None:
    """The size group of a config key ("layers", "width", ...), or None when it is not a size
    (a token id, a rate, a seed, a flag, a key no pattern knows, or a key longer than any
    transformers reads: one of 64,000 characters is a probe, and matching it cost seconds)."""
    if key in _LIMIT_OF_KEY:
        return next(group for group, (keys, _, _) in LIMITS.items() if key in keys)
    if len(key) > MAX_SIZE_KEY_CHARS:
        return None
    name = key.lower()
    if NOT_SIZE_PATTERN.search(name):
        return None
    return next((group for group, pattern in SIZE_PATTERNS if pattern.search(name)), None)


def _bounds(key: str) -> tuple[int, int] | None:
    if key in _LIMIT_OF_KEY:
        return _LIMIT_OF_KEY[key]
    group = size_group(key)
    return _LIMIT_OF_GROUP[group] if group else None


def without_runtime_keys(config: dict) -> dict:
    """A copy of a config without the keys that choose code at load time (attention and
    expert implementations, kernels), at every level. Applied to every config a user gives
    before anything reads it further."""
    def clean(value, depth: int):
        if depth > MAX_NESTING:
            return value
        if isinstance(value, dict):
            return {k: clean(v, depth + 1) for k, v in value.items()
                    if not (isinstance(k, str) and RUNTIME_KEY_PATTERN.search(k))}
        if isinstance(value, list):
            return [clean(v, depth + 1) for v in value]
        return value

    return clean(config, 0)


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
        if getattr(exc, "lineno", None) is None:  # a value json refuses whole (a 5,000-digit number): no position
            raise CalculatorError("config_json_unreadable", name=name, detail=json_reason(exc)) from None
        raise CalculatorError("config_not_json", name=name, detail=json_reason(exc),
                              line=exc.lineno, column=getattr(exc, "colno", "?")) from None
    if not isinstance(data, dict):
        raise CalculatorError("config_not_object", name=name, kind=json_kind(data))
    return data


def read_config_file(path: str | Path) -> tuple[dict, Path]:
    """A config from a path to config.json or to the folder that holds one (CLI only). A path
    the system cannot even look at (too long, a NUL byte) is unreadable, not a crash."""
    try:
        return _read_config_file(Path(path).expanduser())
    except (OSError, ValueError) as exc:
        raise CalculatorError("config_unreadable", path=shown_path(path), detail=os_reason(exc)) from None


def _read_config_file(path: Path) -> tuple[dict, Path]:
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise CalculatorError("config_missing_in_folder", path=shown_path(path.parent))
    if not path.is_file():
        raise CalculatorError("config_file_missing", path=shown_path(path))
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise CalculatorError("config_too_large", name=shown_path(path.name), limit_mib=MAX_CONFIG_BYTES // 2**20)
    return parse_config_text(path.read_bytes(), name=shown_path(path)), path


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
    for key in HIDDEN_KEYS:  # a width of 0 turns a part off, never the whole model
        if config.get(key) == 0:
            raise CalculatorError("config_bad_value", key=key, value="0", low=1, high=LIMITS["width"][2])
    rough = rough_parameter_count(config)
    if rough > MAX_ROUGH_PARAMETERS:
        raise CalculatorError("config_absurd", rough=f"{rough:.3g}", limit=f"{MAX_ROUGH_PARAMETERS:.0e}")


def _check_values(table: dict, depth: int) -> None:
    if depth > MAX_NESTING:
        raise CalculatorError("config_too_nested", name="config.json", limit=MAX_NESTING)
    for key, value in table.items():
        bounds = _bounds(key) if isinstance(key, str) else None
        if key in ("id2label", "label2id"):
            if not isinstance(value, dict | None):
                raise CalculatorError("config_bad_labels", key=key, value=_show(value))
            if value is not None and len(value) > MAX_LABELS:
                raise CalculatorError("config_bad_label_count", key=key, count=Grouped(len(value)), high=Grouped(MAX_LABELS))
            continue
        if bounds is not None and value is not None and not isinstance(value, dict):
            if key in _LIMIT_OF_KEY or isinstance(value, list) or _is_number(value):
                _check_size(key, value, bounds, depth, strict=key in _LIMIT_OF_KEY)
        elif isinstance(value, dict):
            _check_values(value, depth + 1)
        elif isinstance(value, list):
            _check_list(key, value, depth + 1)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_size(key: str, value, bounds: tuple[int, int], depth: int, strict: bool = True) -> None:
    """A size key holds a whole number within its bounds, or a list of them (hidden_sizes,
    depths); a list of layer counts adds up to at most MAX_LAYERS_IN_A_LIST. A key recognised
    by its name only (strict=False) may also hold a flag or a word (summary_proj_to_labels:
    true) or a fraction (mscale_all_dim: 0.707): only numbers are held to the bounds."""
    low, high = bounds
    if not strict and not (_is_number(value) or isinstance(value, list)):
        return
    if isinstance(value, list):
        if depth > MAX_NESTING or len(value) > MAX_LAYERS_IN_A_LIST:
            raise CalculatorError("config_bad_list", key=key, length=Grouped(len(value)), limit=Grouped(MAX_LAYERS_IN_A_LIST))
        for item in value:
            if item is not None:
                _check_size(key, item, bounds, depth + 1, strict)
        if size_group(key) == "layers" and _list_total(value) > MAX_LAYERS_IN_A_LIST:
            raise CalculatorError("config_bad_layer_total", key=key, total=Grouped(_list_total(value)),
                                  high=Grouped(MAX_LAYERS_IN_A_LIST))
        return
    whole = isinstance(value, int) and not isinstance(value, bool)
    if not (whole or (not strict and isinstance(value, float))) or not low <= value <= high:  # NaN fails too
        shown = Grouped(value) if whole and abs(value) < 10**30 else _show(value)
        raise CalculatorError("config_bad_value", key=key, value=shown, low=Grouped(low), high=Grouped(high))


def _list_total(values: list) -> int:
    return sum(_list_total(v) if isinstance(v, list) else v for v in values if isinstance(v, (int, list))
               and not isinstance(v, bool))


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


def _whole(value) -> int:
    """The largest whole number in a size value (an int, or a list of them); 0 otherwise."""
    if isinstance(value, list):
        return max((_whole(v) for v in value), default=0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _largest(table: dict, keys) -> int:
    return max([_whole(table.get(key)) for key in keys] or [0])


def _layers(table: dict) -> int:
    """Layers of one (sub-)config: the headline layer keys add up (encoder + decoder); any
    other layer key (depth, num_blocks, a list of depths per stage) may stand for them all."""
    headline = sum(_whole(v) for k, v in table.items() if k in LAYER_KEYS)
    others = [(_list_total(v) if isinstance(v, list) else _whole(v)) for k, v in table.items()
              if isinstance(k, str) and k not in LAYER_KEYS and size_group(k) == "layers"]
    return max([headline, *others])


def _hidden(table: dict) -> int:
    """The model width: the headline keys, or the widest entry of a list of widths per stage
    (hidden_sizes, embed_dims)."""
    widths = [_whole(v) for k, v in table.items()
              if isinstance(k, str) and isinstance(v, list) and size_group(k) == "width"
              and any(word in k for word in ("hidden", "embed", "dims"))]
    return max([_largest(table, HIDDEN_KEYS), *widths])


def rough_parameter_count(config: dict) -> float:
    """An upper-bound guess of the parameter count from the headline sizes, summed over the
    config and its sub-configs (text, vision, encoder, decoder). Only used to refuse."""
    total = 0.0
    for table in _tables(config, depth=0):
        layers = _layers(table)
        hidden = _hidden(table)
        ffn = max(_largest(table, DENSE_FFN_KEYS), 4 * hidden)
        expert_ffn = _largest(table, ("moe_intermediate_size",)) or ffn
        experts = _largest(table, EXPERT_COUNT_KEYS)
        vocab = _largest(table, VOCAB_KEYS)
        positions = _largest(table, POSITION_KEYS)
        labels = _largest(table, LABEL_KEYS)
        total += layers * (4.0 * hidden * hidden + 3.0 * hidden * (ffn + expert_ffn * experts))
        total += (2.0 * vocab + positions + labels) * hidden
    return total


def _tables(table: dict, depth: int):
    yield table
    if depth < 3:
        for value in table.values():
            if isinstance(value, dict):
                yield from _tables(value, depth + 1)


def transformers_config_keys() -> dict[str, list[tuple[str, object]]]:
    """Every integer-valued key the installed transformers' config classes use: the parameters
    of their __init__ whose default is a whole number or a list of them, or whose annotation
    says int (the default may be None), and the aliases of their attribute_map, with (class,
    default) where each appears. Imports every config class (seconds); the tests walk it to
    check that size_group knows each one and that every default passes the checks."""
    import inspect

    from transformers import CONFIG_MAPPING

    def integer(default, annotation) -> bool:
        if isinstance(default, tuple):
            default = list(default)
        if isinstance(default, bool):
            return False
        if isinstance(default, int) or (isinstance(default, list) and default and _whole(default) == _whole(default)
                                        and all(isinstance(v, int) and not isinstance(v, bool) for v in default)):
            return True
        return default is None and re.search(r"\bint\b", str(annotation)) is not None

    found: dict[str, list[tuple[str, object]]] = {}
    classes: dict[str, type] = {}
    for model_type in list(CONFIG_MAPPING.keys()):
        try:
            cls = CONFIG_MAPPING[model_type]
        except Exception:  # a class whose optional dependency is missing
            continue
        classes[cls.__name__] = cls
        for sub in (getattr(cls, "sub_configs", None) or {}).values():
            if isinstance(sub, type):
                classes.setdefault(sub.__name__, sub)
    for name, cls in classes.items():
        try:
            parameters = list(inspect.signature(cls.__init__).parameters.values())
        except (TypeError, ValueError):
            continue
        kept = {p.name: (list(p.default) if isinstance(p.default, tuple) else p.default) for p in parameters
                if p.default is not inspect.Parameter.empty and integer(p.default, p.annotation)}
        for key, default in kept.items():
            found.setdefault(key, []).append((name, default))
        for alias, target in (getattr(cls, "attribute_map", None) or {}).items():
            if target in kept:
                found.setdefault(alias, []).append((name, kept[target]))
    return found
