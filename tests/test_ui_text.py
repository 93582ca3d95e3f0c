"""Both languages have the same UI strings, files and placeholders."""

from __future__ import annotations

import re
import string

from calculator.messages import CATALOG_DIR, catalog


def test_same_files_in_both_languages():
    assert sorted(p.name for p in (CATALOG_DIR / "en").glob("*.toml")) == \
        sorted(p.name for p in (CATALOG_DIR / "fr").glob("*.toml"))


def test_same_keys_and_placeholders():
    en, fr = catalog("en"), catalog("fr")
    assert en.keys() == fr.keys()
    fields = lambda s: sorted({f for _, f, _, _ in string.Formatter().parse(s) if f})  # noqa: E731
    for key in en:
        assert fields(en[key]) == fields(fr[key]), key


def test_french_strings_are_not_left_in_english():
    en, fr = catalog("en"), catalog("fr")
    same = [k for k in en if en[k] == fr[k] and re.search(r"[a-z]{4,} [a-z]{4,}", en[k])]
    assert same == [], same
