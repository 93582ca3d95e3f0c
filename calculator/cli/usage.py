"""argparse's refusals, said in our words in each language.

argparse writes its errors in English from fixed templates (Lib/argparse.py, the strings it
passes to gettext). The ones a person meets are read back here into a Reason, their option
names and values kept as data; any other keeps argparse's words, labelled as argparse's own."""

from __future__ import annotations

import re

from calculator.core.reasons import Reason, library, reason

_KINDS = {"int": "cli_not_whole_number", "float": "cli_not_number"}
_ARGUMENT = r"argument (?P<argument>.+?): "
_PATTERNS = (
    (r"unrecognized arguments: (?P<args>.*)", "cli_unrecognized"),
    (r"the following arguments are required: (?P<args>.*)", "cli_required"),
    (r"one of the arguments (?P<args>.*) is required", "cli_one_required"),
    (r"ambiguous option: (?P<option>\S+) could match (?P<matches>.*)", "cli_ambiguous"),
    (_ARGUMENT + r"invalid choice: (?P<value>.*) \(choose from (?P<choices>.*)\)", "cli_invalid_choice"),
    (_ARGUMENT + r"invalid (?P<kind>\w+) value: (?P<value>.*)", "cli_invalid_value"),
    (_ARGUMENT + r"expected one argument", "cli_expected_one"),
    (_ARGUMENT + r"expected at least one argument", "cli_expected_some"),
    (_ARGUMENT + r"expected at most one argument", "cli_expected_at_most_one"),
    (_ARGUMENT + r"not allowed with argument (?P<other>.*)", "cli_not_allowed"),
    (_ARGUMENT + r"ignored explicit argument (?P<value>.*)", "cli_takes_no_value"),
)


def usage_reason(message: str) -> Reason:
    """What argparse refused, as a Reason of reasons.toml (or argparse's own words)."""
    for pattern, key in _PATTERNS:
        found = re.fullmatch(pattern, message, flags=re.DOTALL)
        if found:
            params = found.groupdict()
            if key == "cli_invalid_value":
                key = _KINDS.get(params.pop("kind"), "cli_invalid_value")
            return reason(key, **params)
    return library("argparse", message)
