"""The chapter's title painted with Streamlit's page (guide/page_shell.py): which
title, in which language, and what the middleware writes into the page Streamlit installs."""

from __future__ import annotations

import gzip
from html.parser import HTMLParser
from pathlib import Path

import pytest
import streamlit

from guide import chapters
from guide.page_shell import Shell, first_language, page_language, page_shell, with_shell
from tests.test_http import serve_page

STREAMLIT_PAGE = (Path(streamlit.__file__).parent / "static" / "index.html").read_bytes()


class Read(HTMLParser):
    """The document's language, the tab's title and the shell's title as a browser reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.lang = self.tab = self.shell = None
        self._in = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "html":
            self.lang = attrs.get("lang")
        if tag == "title":
            self._in = "tab"
        if attrs.get("class") == "guide-shell-title":
            self._in = "shell"
            assert (attrs.get("role"), attrs.get("aria-level")) == ("heading", "1")

    def handle_data(self, data):
        if self._in:
            setattr(self, self._in, (getattr(self, self._in) or "") + data)

    def handle_endtag(self, tag):
        self._in = None


def read(page: bytes) -> Read:
    reader = Read()
    reader.feed(page.decode("utf-8"))
    return reader


@pytest.mark.parametrize("accept, lang", [("fr-FR,fr;q=0.9,en;q=0.8", "fr"), ("fr", "fr"), ("en-GB,fr;q=0.9", "en"),
                                          ("de-DE,fr;q=0.9", "en"), ("", "en"), ("FR-ca", "fr"), ("*", "en")])
def test_the_browser_s_first_language_as_the_page_s_script_reads_it(accept, lang):
    assert first_language(accept) == lang


def test_the_url_s_language_wins_as_st_query_params_reads_it():
    assert page_language("lang=fr", "en-US") == "fr"
    assert page_language("batch=4&lang=en", "fr-FR") == "en"
    assert page_language("lang=en&lang=fr", "") == "fr"  # the last value, as st.query_params gives it
    assert page_language("lang=de", "fr-FR") == "fr"  # not a language of the guide: the browser's
    assert page_language("lang=", "") == "en"
    assert page_language("x=" + "a" * 10_000 + "&lang=fr", "") == "en"  # past the bytes read


def test_a_title_only_where_a_chapter_lives():
    assert page_shell([], "", "") == Shell("en", chapters.HOME.title("en"))
    assert page_shell(["oom"], "lang=fr", "") == Shell("fr", chapters.by_slug("oom").title("fr"))
    assert page_shell(["no-such-page"], "", "") is None
    assert page_shell(["oom", "extra"], "", "") is None


def test_the_page_streamlit_installs_gets_the_language_the_tab_and_the_title():
    """On Streamlit's own index.html: its marks (`<html lang="en">`, its <title>, <body>) are there."""
    title = chapters.by_slug("fine-tuning").title("fr")
    page = read(with_shell(STREAMLIT_PAGE, Shell("fr", title)))
    assert (page.lang, page.tab, page.shell) == ("fr", title, title)
    shown = read(with_shell(STREAMLIT_PAGE, Shell("en", "<b>Fits & runs</b>")))  # escaped, never markup
    assert (shown.tab, shown.shell) == ("<b>Fits & runs</b>", "<b>Fits & runs</b>")
    assert b"<!--" not in with_shell(b"<body>", Shell("en", "x"))  # the asset's notes stay in assets/
    assert with_shell(b"<html><p>no marks</p></html>", Shell("fr", "x")) == b"<html><p>no marks</p></html>"


def test_the_middleware_writes_it_in_the_reader_s_language():
    oom_fr, oom_en = chapters.by_slug("oom").title("fr"), chapters.by_slug("oom").title("en")
    _, body = serve_page("/oom", STREAMLIT_PAGE, query=b"lang=fr")
    assert (read(body).lang, read(body).shell) == ("fr", oom_fr)
    _, body = serve_page("/oom", STREAMLIT_PAGE, headers=[(b"accept-language", b"fr-FR,fr;q=0.9")])
    assert read(body).shell == oom_fr
    _, body = serve_page("/oom", STREAMLIT_PAGE, query=b"lang=en", headers=[(b"accept-language", b"fr-FR")])
    assert read(body).shell == oom_en
    headers, body = serve_page("/oom", gzip.compress(STREAMLIT_PAGE), b"gzip", query=b"lang=fr")
    assert read(gzip.decompress(body)).shell == oom_fr and int(headers["content-length"]) == len(body)
    _, body = serve_page("/no-such-page", STREAMLIT_PAGE)
    assert (read(body).tab, read(body).shell) == ("Streamlit", None)
