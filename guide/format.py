"""Numbers for the page, in the reader's language (decimal comma and Go/Gio in French)."""

from __future__ import annotations

import re

from calculator.core.units import format_billions, format_bytes, format_count, format_number

__all__ = ["format_billions", "format_bytes", "format_count", "format_number", "escape_markdown"]

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def escape_markdown(value: object, limit: int = 120) -> str:
    """Whatever a user typed, shown as plain text in st.markdown: no links, images or HTML."""
    # no-break spaces are kept: French numbers group their digits with them (1 048 576)
    shown = "".join(ch if ch.isprintable() or ch in "\u00a0\u202f" else "?" for ch in str(value))
    if len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return _MARKDOWN_SPECIAL.sub(r"\\\1", shown)


def format_percent(fraction: float, lang: str = "en", decimals: int = 1) -> str:
    """0.429 -> 42.9% in English, 42,9 % in French (a narrow no-break space before %)."""
    number = format_number(100 * fraction, decimals, lang)
    return f"{number}\u202f%" if lang == "fr" else f"{number}%"
