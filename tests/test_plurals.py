"""A word agrees with its number in each language, by CLDR's plural rules (Babel): no "(s)" in
any message, "1 user fits" and "64 users fit", French "0 séquence", "1,5 heure" and "2 séquences"."""

from __future__ import annotations

import json

import pytest

from calculator.core.errors import Grouped
from calculator.core.messages import LANGUAGES, PLURAL, agree, catalog, quantity
from tests.cli_runner import run_cli


def test_no_message_says_s_in_brackets():
    offenders = [f"{lang}: {key}" for lang in LANGUAGES for key, value in catalog(lang).items()
                 if isinstance(value, str) and "(s)" in value]
    assert not offenders, offenders


def test_every_plural_names_a_placeholder_of_its_message():
    """{n|one|other} reads the value of `n`: a name the message does not fill would always
    take the other form."""
    from calculator.core.messages import catalog as messages

    for lang in LANGUAGES:
        for key, value in messages(lang).items():
            for name, *_ in PLURAL.findall(value if isinstance(value, str) else ""):
                assert "{" + name + "}" in value or "{" + name + ":" in value, (lang, key, name)


@pytest.mark.parametrize("lang,value,form", [
    ("en", 1, "one"), ("en", 0, "other"), ("en", 2, "other"), ("en", 1.5, "other"), ("en", "1,024", "other"),
    ("fr", 0, "one"), ("fr", 1, "one"), ("fr", "1,5", "one"), ("fr", 2, "other"), ("fr", "1\u202f024", "other"),
    ("en", Grouped(1), "one"), ("en", "n/a", "other"), ("fr", float("nan"), "other"), ("en", "inf", "other"),
])
def test_the_form_is_cldrs(lang, value, form):
    assert agree("{n|one|other}", lang, {"n": value}) == form


def test_a_number_as_the_pages_write_it_is_read():
    assert quantity("1,024") == 1024 and quantity("1 024") == 1024 and quantity("1,5") == 1.5
    assert quantity(True) is None and quantity("—") is None


@pytest.mark.parametrize("lang,users,said", [
    ("en", "1", "1 user **fits**"), ("en", "16", "16 users **fit**"),
    ("fr", "1", "1 utilisateur **tient**"), ("fr", "16", "16 utilisateurs **tiennent**"),
])
def test_the_serving_answer_agrees_with_its_users(lang, users, said):
    done = run_cli("serve", "llama-3.1-8b", "--gpu", "h100", "--context", "8192", "--users", users,
                   "--markdown", "--lang", lang)
    assert done.returncode == 0, done.stderr
    first = done.stdout.split("\n\n")[0].replace("\u202f", " ").replace("\u00a0", " ")
    assert said in first and "(s)" not in done.stdout


def test_an_answer_for_one_sequence_says_one_sequence():
    done = run_cli("inference", "llama-3.1-8b", "--batch", "1", "--prompt", "512", "--gpu", "l4", "--markdown")
    data = json.loads(run_cli("inference", "llama-3.1-8b", "--batch", "1", "--prompt", "512", "--gpu", "l4",
                              "--json").stdout)
    assert data["batch"] == 1 and "**1 sequence of" in done.stdout and "sequences of" not in done.stdout.split("\n")[0]
