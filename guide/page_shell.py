"""The chapter's title in Streamlit's page itself, painted with its HTML.

Streamlit's page is blank until its scripts have run and the server has sent the script's
first element: about 0.9 s on this 2-core machine, as long for Streamlit's own one-line app
(bench/first_heading.py). The middleware (guide/http.py) knows the chapter from the path and
the reader's language from `?lang=` or, as the page's own script would find it, from the
browser's first language; it writes into the page the chapter's title where Streamlit will draw
it (assets/page_shell.html), the tab's title, and the document's language. The title goes as
soon as Streamlit draws the chapter's own.

A path that names no chapter gets no title (the page then says "no such page").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
import html
import re
from urllib.parse import parse_qs

from calculator.core.messages import LANGUAGES
from guide.i18n import language_of

MAX_QUERY_BYTES = 8192  # only the first 8 KiB of a query string is read for its lang (a reader's link is far shorter)


@dataclass(frozen=True)
class Shell:
    lang: str
    title: str


def first_language(accept_language: str) -> str:
    """The language the page's script will find (guide/i18n.py browser_language reads the
    browser's first language, which Chromium and Firefox send first in Accept-Language)."""
    return language_of(accept_language.split(",", 1)[0].split(";", 1)[0].strip())


def page_language(query: str, accept_language: str) -> str:
    """`?lang=` when it names a language of the guide (its last value, as st.query_params
    reads it); the browser's first language otherwise (guide/i18n.py current_language)."""
    asked = parse_qs(query[:MAX_QUERY_BYTES]).get("lang", [])
    return asked[-1] if asked and asked[-1] in LANGUAGES else first_language(accept_language)


@lru_cache(maxsize=64)
def _title(slug: str, lang: str) -> str | None:
    from guide import chapters

    chapter = chapters.by_slug(slug)
    return chapter.title(lang) if chapter is not None else None


def page_shell(segments: list[str], query: str, accept_language: str) -> Shell | None:
    """The title to write into the page at this path, or None where no chapter lives."""
    if len(segments) > 1:
        return None
    lang = page_language(query, accept_language)
    title = _title(segments[0] if segments else "", lang)
    return Shell(lang, title) if title is not None else None


@lru_cache(maxsize=1)
def _template() -> str:
    from guide.chapters import ROOT

    text = (ROOT / "assets" / "page_shell.html").read_text(encoding="utf-8")
    return re.sub(r"<!--.*?-->\s*", "", text, flags=re.S)  # its notes stay in assets/, not in every page


def with_shell(page: bytes, shell: Shell) -> bytes:
    """Streamlit's page with the document's language, the tab's title and the chapter's title
    first in its body; a page without those marks is left as it is, mark by mark."""
    title = html.escape(shell.title)
    lang = html.escape(shell.lang).encode()
    page = page.replace(b'<html lang="en">', b'<html lang="' + lang + b'">', 1)
    page = page.replace(b"<title>Streamlit</title>", f"<title>{title}</title>".encode(), 1)
    body = page.find(b"<body>")
    if body < 0:
        return page
    body += len(b"<body>")
    return page[:body] + _template().replace("{title}", title).encode() + page[body:]
