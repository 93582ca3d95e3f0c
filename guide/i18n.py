"""The reader's language and the UI strings in it.

The URL decides (?lang=en or ?lang=fr); without it, the browser's language; else English.
The resolved language is written back into the URL, so every link people copy carries it.
"""

from __future__ import annotations

import streamlit as st

from calculator.core.messages import DEFAULT_LANGUAGE, LANGUAGES, text
import guide.typography  # noqa: F401  (registers French typography for every UI message)

LANGUAGE_NAMES = {"en": "English", "fr": "Français"}


def language_of(locale: str) -> str:
    """The guide's language for a browser's locale ("fr-CA": fr), English for any other."""
    return next((lang for lang in LANGUAGES if locale.lower().startswith(lang)), DEFAULT_LANGUAGE)


def browser_language() -> str:
    return language_of(st.context.locale or "")


def current_language() -> str:
    asked = st.query_params.get("lang")
    return asked if asked in LANGUAGES else browser_language()


def remember_language(lang: str) -> str | None:
    """Write the language into the URL. Returns what was asked if it was not a language we
    have (the page then says so, in the language it falls back to)."""
    asked = st.query_params.get("lang")
    if asked != lang:
        st.query_params["lang"] = lang
    return asked if asked not in (None, lang) else None


def t(key: str, /, **params: object) -> str:
    return text(key, current_language(), **params)
