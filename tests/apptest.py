"""Helpers to run the guide's pages with AppTest (no browser)."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from guide import chapters
from tests.conftest import ROOT


def open_page(slug: str, lang: str | None = "en", locale: str | None = None, **query: str) -> AppTest:
    """Run the app on a chapter, as a browser opening /<slug>?lang=..&query.. would."""
    at = AppTest.from_file(str(ROOT / "Home.py"), default_timeout=90)
    at.query_params.update({**({"lang": lang} if lang else {}), **query})
    at.context = {"url": f"http://localhost:8501/{slug}", **({"locale": locale} if locale else {})}
    chapter = chapters.by_slug(slug)
    at.run()
    if slug:
        at.switch_page(chapter.page)
        at.run()
    return at


def fingerprint(at: AppTest) -> str:
    """Everything a reader sees as results: metrics, text, tables, alerts and charts."""
    parts = [m.value for m in at.metric] + [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [str(d.value) for d in at.dataframe] + [c.value for c in at.code]
    parts += [a.value for kind in (at.success, at.info, at.warning, at.error) for a in kind]
    parts += [json.loads(c.proto.spec).get("data", []).__repr__() for c in at.get("plotly_chart")]
    return "\n".join(parts)


def texts(at: AppTest) -> str:
    """All visible text of the page, for language checks."""
    parts = [t.value for t in at.title] + [h.value for h in at.header] + [h.value for h in at.subheader]
    return "\n".join(parts) + "\n" + fingerprint(at)
