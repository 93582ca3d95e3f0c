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
_PATTERNS = (  # (pattern searched in the message, the cause)
    (r"The hidden size \((?P<hidden>\d+)\) is not a multiple of the number of attention heads \((?P<heads>\d+)\)",
     "tf_heads_divide"),
    (r"`embed_dim` must be divisible by num_heads \(got `embed_dim`: (?P<hidden>\d+) and `num_heads`: (?P<heads>\d+)\)",
     "tf_heads_divide"),
    (r"Validation error for field '(?P<field>[^']{1,60})'.*?expected (?P<expected>\w+), got", "tf_field"),
    (r"module 'torch' has no attribute '(?P<value>[^']{1,60})'", "tf_unknown_dtype"),
)


def transformers_reason(exc: BaseException, config: object = None) -> Reason:
    """Why transformers refused `config` (a dict or a transformers config)."""
    message = " ".join(str(exc).split())
    for pattern, key in _PATTERNS:
        found = re.search(pattern, message)
        if not found:
            continue
        params = found.groupdict()
        if key == "tf_field":
            key = _EXPECTED.get(params.pop("expected"))
            if key is None:
                break
        return reason(key, **params)
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
