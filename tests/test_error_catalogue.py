"""Every refusal the engine, the CLI or the guide can raise has its message in English and in
French, with the placeholders its raise site fills in, and no French message is left in English
(bad input gets a clear message in the user's language). The raise sites are
read from the source (every `CalculatorError("code", ...)`, every `reason("key", ...)`), so a new
refusal is checked the day it is written."""

from __future__ import annotations

import ast
import re
import string

import pytest

from calculator.core.messages import catalog
from tests.conftest import ROOT

SOURCES = sorted([*ROOT.joinpath("calculator").rglob("*.py"), *ROOT.joinpath("guide").rglob("*.py")])
# Codes a raise site builds at run time, not as a literal: each named where it is built.
DYNAMIC_ERRORS = {
    "hub_no_config", "no_safetensors", "safetensors_unreadable",  # HubFile(missing=...), models/hub.py
    "safetensors_index_too_large", "config_too_large",  # HubFile(too_large=...)
    "remote_code_no_safetensors", "unknown_type_no_safetensors", "no_config_no_safetensors",  # seam.py
    "serve_speech", "serve_encoder_decoder", "serve_no_decoder",  # serving/refusals.py
}


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def raise_sites(function: str) -> list[tuple[str, str, set[str] | None]]:
    """(where, literal code, keyword names or None when some come from **params) of each call
    of `function` whose first argument is a literal."""
    sites = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and _name(node.func) == function and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names = {k.arg for k in node.keywords}
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                sites.append((where, node.args[0].value, None if None in names else names))
    return sites


def placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


def mapped_reasons() -> set[str]:
    """The causes the mapping tables name (json's, the OS's, argparse's)."""
    from calculator.cli import usage
    from calculator.core import reasons

    keys = {key for _, key in reasons._JSON} | set(reasons._OS.values())
    keys |= {reasons.json_kind(value).key for value in (None, True, [], "", 1)}
    return keys | {key for _, key in usage._PATTERNS} | set(usage._KINDS.values())


ERROR_SITES = raise_sites("CalculatorError")
REASON_SITES = raise_sites("reason") + [(f"library({s})", f"library_{s}", {"detail"}) for _, s, _ in raise_sites("library")]


def test_the_walk_finds_the_raise_sites():
    assert len({code for _, code, _ in ERROR_SITES}) > 80  # a walk that found nothing would pass below
    assert any(code == "config_not_json" for _, code, _ in ERROR_SITES)
    assert any(key == "offline_mode" for _, key, _ in REASON_SITES)


@pytest.mark.parametrize("prefix, sites", [("error", ERROR_SITES), ("reason", REASON_SITES)])
def test_every_raise_site_has_both_languages_with_the_placeholders_it_fills(prefix, sites):
    en, fr = catalog("en"), catalog("fr")
    missing, unfilled = [], []
    for where, code, given in sites:
        key = f"{prefix}.{code}"
        if key not in en or key not in fr:
            missing.append((where, key))
            continue
        assert placeholders(en[key]) == placeholders(fr[key]), key
        if given is not None and not placeholders(en[key]) <= given:  # a KeyError when it is raised
            unfilled.append((where, key, sorted(placeholders(en[key]) - given)))
    assert missing == [] and unfilled == []


@pytest.mark.parametrize("key", sorted({f"error.{c}" for c in DYNAMIC_ERRORS} | {f"reason.{k}" for k in mapped_reasons()}))
def test_every_code_built_at_run_time_has_both_languages(key):
    en, fr = catalog("en"), catalog("fr")
    assert key in en and key in fr and placeholders(en[key]) == placeholders(fr[key])


# English words that French never writes as words of its own ("on", "a", "as", "an", "but",
# "file", "or" are French too, so they are not here).
ENGLISH_WORDS = {
    "the", "and", "of", "to", "is", "are", "with", "this", "that", "from", "for", "not", "you", "your", "which",
    "cannot", "does", "must", "be", "it", "its", "has", "have", "than", "into", "only", "when", "per", "was",
    "were", "will", "would", "should", "there", "their", "these", "those", "what", "how", "why", "by", "at",
    "all", "any", "more", "less", "one", "two", "we", "our", "please", "use", "check", "try", "again", "give",
    "pick", "set", "see", "instead", "if", "then", "so", "too", "just", "out", "up", "about", "while", "after",
    "before", "other", "model", "models", "layer", "layers", "memory", "missing", "unknown", "invalid",
    "expected", "error", "failed", "found", "denied",
}


def prose(message: str) -> str:
    """A message without what is not prose: code spans, placeholders, quoted words (« » quote
    names and the programs' own lines), links, options, file names, commands, code-like tokens
    and names of arguments in capitals."""
    for pattern in (r"`[^`]*`", r"\{[^{}]*\}", r"«[^»]*»", r"\]\([^)]*\)", r"--[\w-]+", r"\S+\.(json|py|toml|md)\b",
                    r"python -m calculator[^.;,)]*", r"\S*[-_/()=:.]\w\S*", r"\b[A-Z][A-Z0-9]+\b"):
        message = re.sub(pattern, " ", message)
    return message


def english_in(message: str) -> list[str]:
    return sorted({word for word in re.findall(r"[A-Za-z']+", prose(message)) if word.lower() in ENGLISH_WORDS})


def test_the_english_check_can_fail():
    assert english_in("Impossible de lire {path} : Permission denied.") == ["denied"]
    assert english_in("Cannot read the file") == ["Cannot", "the"]
    assert english_in("Utilisez `--model-class base` ou « memory_summary() » : all-linear, MODEL.") == []


@pytest.mark.parametrize("prefix", ["error.", "reason."])
def test_no_french_message_is_left_in_english(prefix):
    leaks = {key: english_in(value) for key, value in catalog("fr").items() if key.startswith(prefix)}
    assert {key: words for key, words in leaks.items() if words} == {}
