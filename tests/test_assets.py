"""Front-end code (JavaScript, CSS) lives in assets/, never in Python strings; what a script
needs from Python reaches it through data- attributes of the page, not through its text."""

from __future__ import annotations

import html
import re

import pytest

from guide import render
from calculator.core.messages import text
from tests.apptest import open_page
from tests.conftest import ROOT

PYTHON_SOURCES = sorted(
    [path for folder in ("calculator", "guide", "chapter_pages") for path in (ROOT / folder).rglob("*.py")]
    + [ROOT / "Home.py"]
)
INLINE = re.compile(r"<\s*(script|style)\b", re.IGNORECASE)


def test_there_are_python_sources_to_check():
    assert ROOT / "guide" / "render.py" in PYTHON_SOURCES and len(PYTHON_SOURCES) > 20


@pytest.mark.parametrize("path", PYTHON_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_script_or_style_inside_python(path):
    found = INLINE.findall(path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(ROOT)}: move the front-end code into assets/"


def test_the_assets_render_loads_exist():
    assert (ROOT / "assets").is_dir() and render.ASSETS == ROOT / "assets"
    assert render.ASSET_FILES
    for path in render.ASSET_FILES:
        assert path.parent == ROOT / "assets" and path.is_file() and path.read_text(encoding="utf-8").strip()
        if path.suffix == ".css":
            assert not INLINE.search(path.read_text(encoding="utf-8"))  # st.html adds the style tag
        else:
            assert "<script>" in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("lang", ("en", "fr"))
def test_scripts_are_sent_as_written_with_their_data_beside_them(lang):
    at = open_page("oom", lang)
    bodies = [element.proto.body for element in at.get("html")]
    frame = next(b for b in bodies if b.endswith(render.FRAME_SCRIPT.read_text(encoding="utf-8").strip()))
    message = re.search(r'data-guide-missing-section="([^"]*)"', frame).group(1)
    assert html.unescape(message) == text("frame.unknown_section", lang)
    switch = next(b for b in bodies if b.endswith(render.SWITCH_SCRIPT.read_text(encoding="utf-8").strip()))
    sections = re.search(r'data-guide-sections="([^"]*)"', switch).group(1).split(", ")
    assert sections[0] == "#oom-message" and "#context-length" in sections
    assert any(render.SCROLL_SCRIPT.read_text(encoding="utf-8").strip() in b for b in bodies)


@pytest.mark.parametrize("path", [p for p in render.ASSET_FILES if p.suffix == ".html"], ids=lambda p: p.name)
def test_scripts_hold_nothing_the_sanitizer_drops(path):
    """Streamlit passes st.html through DOMPurify, which removes a whole script whose text
    holds "<" before a letter or a slash (SAFE_FOR_XML): a comment naming <lang> silently
    disabled the frame script once."""
    for script in re.findall(r"<script>(.*?)</script>", path.read_text(encoding="utf-8"), re.S):
        assert not re.search(r"<[/\w]", script), f"{path.name}: '<' followed by a letter or '/' in a script"
