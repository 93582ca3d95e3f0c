"""transformers' refusals of a config, said in our words in each language.

transformers (5.x) refuses a config in English: its strict dataclass validation ("Validation error
for field 'x': ... expected bool, got str"), its architectures' own checks ("The hidden size (100)
is not a multiple of the number of attention heads (3)"), a KeyError naming a value it has no
entry for (an activation, a RoPE type). The ones readers meet are read back into a Reason, the
numbers and names kept as data; any other keeps transformers' words, labelled as its own."""

from __future__ import annotations

import re

from calculator.core.reasons import Reason, library, reason

_EXPECTED = {"bool": "tf_field_bool", "int": "tf_field_int", "float": "tf_field_float", "str": "tf_field_str"}
# (pattern searched in the message, the cause); each bounded, the message may quote a reader's value
_PATTERNS = (
    (re.compile(r"The (?:hidden size|embed_dim) \((?P<hidden>\d{1,12})\) is not a multiple of the number of attention heads "
                r"\((?P<heads>\d{1,12})\)"), "tf_heads_divide"),
    (re.compile(r"`embed_dim` must be divisible by num_heads \(got `embed_dim`: (?P<hidden>\d{1,12}) and "
                r"`num_heads`: (?P<heads>\d{1,12})\)"), "tf_heads_divide"),
    (re.compile(r"Validation error for field '(?P<field>[^']{1,60})'.{0,400}?expected (?P<expected>\w{1,20}), got"),
     "tf_field"),
    (re.compile(r"module 'torch' has no attribute '(?P<value>[^']{1,60})'"), "tf_unknown_dtype"),
    # PreTrainedConfig.validate_layer_type (transformers 5): the per-layer attention kinds
    (re.compile(r"The `(?P<key>\w{1,40})` entries must be in \((?P<allowed>[^)]{1,600})\)"), "tf_layer_types_unknown"),
    (re.compile(r"`num_hidden_layers` \((?P<layers>\d{1,12})\) must be equal to the number of `(?P<key>\w{1,40})` "
                r"\((?P<count>\d{1,12})\)"), "tf_layer_types_count"),
)
# huggingface_hub's strict dataclasses wrap a class validator's error: "Class validation error
# for validator 'validate_x': ValueError: ...". One we have no sentence for is named in ours.
_VALIDATOR = re.compile(r"Class validation error for validator '(?P<validator>\w{1,60})':\s?(?:\w{1,40}: )?")


def transformers_reason(exc: BaseException, config: object = None) -> Reason:
    """Why transformers refused `config` (a dict or a transformers config)."""
    message = " ".join(str(exc).split())
    for pattern, key in _PATTERNS:
        found = pattern.search(message)
        if not found:
            continue
        params = found.groupdict()
        if key == "tf_field":
            key = _EXPECTED.get(params.pop("expected"))
            if key is None:
                break
        if key == "tf_layer_types_unknown":
            params["allowed"] = ", ".join(part.strip(" '\"") for part in params["allowed"].split(","))
        return reason(key, **params)
    validator = _VALIDATOR.search(message)
    if validator:
        return reason("tf_validator", validator=validator["validator"],
                      detail=library("transformers", message[validator.end():]))
    if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
        holder = _key_holding(config, exc.args[0])
        if holder:
            return reason("tf_unknown_value", key=holder, value=exc.args[0][:60])
    return library("transformers", message)


def _key_holding(config: object, value: str) -> str | None:
    """The config key (one level of nesting at most: rope_parameters.rope_type) whose value is
    `value`: the value transformers found no entry for."""
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    if not isinstance(config, dict):
        return None
    for key, held in config.items():
        if held == value:
            return str(key)[:60]
        if isinstance(held, dict):
            for inner, deep in held.items():
                if deep == value:
                    return f"{key}.{inner}"[:60]
    return None
