"""The UI text catalogs (content/ui/<lang>/*.toml), shared by the CLI and the guide.

One folder per language, the same files and keys in each (a test checks it): one file per
widget or topic, so chapters add strings without touching each other's. The CLI speaks
English; the guide picks the reader's language. Keys are dotted: "error.unknown_dtype".

A word that agrees with a number is written `{name|one form|other form}`: the form is the one
CLDR's plural rule of the language gives for the value of `name` (Babel's data), so English
says "1 sequence" and "2 sequences", French "0 séquence", "1,5 heure" and "2 séquences"; never
"sequence(s)". The forms may hold more than the noun ("{users|user **fits**|users **fit**}").
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
import re
import tomllib

LANGUAGES: tuple[str, ...] = ("en", "fr")
DEFAULT_LANGUAGE = "en"
CATALOG_DIR = Path(__file__).resolve().parents[2] / "content" / "ui"

# What a language's typesetting does to a finished message (French: narrow no-break spaces
# before : ; ! ? %, between a number and its unit...). The UI layer registers it
# (guide/typography.py registers its `french` for "fr"); the CLI, which speaks English,
# never does, so its output stays plain. Messages written into generated code (the
# snippet.* strings, printed by the scripts readers paste) are left as they are.
_FINISHERS: dict[str, Callable[[str], str]] = {}
_UNFINISHED = ("snippet.",)


def set_finisher(lang: str, finish: Callable[[str], str] | None) -> None:
    """Apply `finish` to every message rendered in `lang` (None: stop doing so)."""
    if finish is None:
        _FINISHERS.pop(lang, None)
    else:
        _FINISHERS[lang] = finish


def _flatten(table: dict, prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


@cache
def catalog(lang: str) -> dict[str, str]:
    """All UI strings of one language, flattened to dotted keys."""
    if lang not in LANGUAGES:
        lang = DEFAULT_LANGUAGE
    merged: dict[str, str] = {}
    for path in sorted((CATALOG_DIR / lang).glob("*.toml")):
        with open(path, "rb") as handle:
            table = _flatten(tomllib.load(handle))
        clash = merged.keys() & table.keys()
        if clash:
            raise ValueError(f"{path}: keys defined twice: {sorted(clash)[:5]}")
        merged.update(table)
    return merged


PLURAL = re.compile(r"\{(\w{1,40})\|([^{}|]{1,80})\|([^{}|]{1,80})\}")


@cache
def _plural_rule(lang: str):
    from babel import Locale

    return Locale.parse(lang if lang in LANGUAGES else DEFAULT_LANGUAGE).plural_form


def quantity(value: object) -> float | None:
    """The number a placeholder's value stands for: a number, a Grouped count, or a number as
    the pages write it ("1,024", "1 024", "1,5" in French); None when it is none."""
    value = getattr(value, "value", value)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    digits = re.sub(r"[\s\u00a0\u202f]", "", str(value))
    if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", digits):
        digits = digits.replace(",", "")
    try:
        return float(digits.replace(",", "."))
    except ValueError:
        return None


def agree(template: str, lang: str, params: dict) -> str:
    """`template` with each {name|one|other} written in the form its number takes in `lang`."""
    def form(match: re.Match) -> str:
        number = quantity(params.get(match[1]))
        try:
            one = number is not None and _plural_rule(lang)(number) == "one"
        except (ValueError, OverflowError, ArithmeticError):  # nan, inf: not a count
            one = False
        return match[2] if one else match[3]

    return PLURAL.sub(form, template) if "|" in template else template


def text(key: str, lang: str = DEFAULT_LANGUAGE, /, **params: object) -> str:
    """One UI string with its {placeholders} filled in. A missing key shows the key itself."""
    template = catalog(lang).get(key)
    if template is None:
        template = catalog(DEFAULT_LANGUAGE).get(key, key)
    message = agree(template, lang, params).format(**params) if params else template
    finish = _FINISHERS.get(lang)
    return finish(message) if finish and not key.startswith(_UNFINISHED) else message
