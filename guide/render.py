"""Render a chapter: the shared frame, its sections with fixed anchors, widgets where their
markers stand, previous/home/next from the registry, and scrolling to the URL's section."""

from __future__ import annotations

from functools import cache, lru_cache
import html
import json
from pathlib import Path
import re

import streamlit as st

from guide import chapters
from guide.case_bar import carried_query, case_bar
from guide.chapters import Chapter
from guide.format import escape_markdown
from calculator.core.messages import catalog, text
from guide.i18n import LANGUAGE_NAMES, current_language, remember_language, t
from guide.section_links import section_links
from guide.markdown import ChapterList, Heading, Text, WidgetSlot, localize_links, parse
from guide.typography import for_language
from guide.url_values import dropped, refuse_bad_values
from guide.widgets import Context, registry, render_widget, url_kinds

# The front-end code lives in assets/ (DESIGN.md): the styles, and one HTML fragment per script.
# What a script needs from Python (a localized message, a selector) is written into data-
# attributes of the element drawn with it, never into the script's text.
ASSETS = chapters.ROOT / "assets"
STYLE = ASSETS / "guide.css"  # st.html wraps a .css file in a style tag
FRAME_SCRIPT = ASSETS / "frame.html"  # scroll to and hold the section, same-tab links, no "Page not found"
SCROLL_SCRIPT = ASSETS / "scroll.html"  # after every render: bring the URL's #section into view
SWITCH_SCRIPT = ASSETS / "language_switch.html"  # the other language, same page and section
ASSET_FILES = (STYLE, FRAME_SCRIPT, SCROLL_SCRIPT, SWITCH_SCRIPT)


@cache
def _asset(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@lru_cache(maxsize=32)
def _blocks(path: Path):
    return parse(path.read_text(encoding="utf-8"))


def render_page(slug: str) -> None:
    refused = refuse_bad_values(url_kinds())  # before any widget: values Streamlit cannot read never reach it
    chapter = chapters.by_slug(slug)
    lang = current_language()
    unknown = remember_language(lang)
    blocks = _blocks(chapter.content_path(lang))
    st.title(chapter.title(lang), anchor=False)  # first, so the reader sees the page at once
    _frame(chapter, lang, blocks)
    if unknown is not None:
        st.warning(t("frame.unknown_language", asked=escape_markdown(unknown, 20)))
    # A refused value of a widget's own parameter is reported by that widget; the others
    # (the chapter's case, a parameter of another chapter's widget) here.
    shown_by_widgets = {p.key for b in blocks if isinstance(b, WidgetSlot) and b.name in registry()
                        for p in registry()[b.name].params}
    elsewhere = [(key, raw) for key, raw in refused.items() if key not in shown_by_widgets]
    if elsewhere:
        st.warning(" ".join(t("frame.bad_url_value", param=escape_markdown(key, 40),
                              value=escape_markdown(", ".join(raw), 60)) for key, raw in elsewhere))
    missing_page = st.session_state.get("unknown_page") if not slug else None
    if missing_page:
        st.warning(t("frame.unknown_page", page=escape_markdown(missing_page, 60)))
    case = case_bar(chapter.case, chapter.defaults, lang) if chapter.case else None
    # every heading's "Link to this section", made in the browser from the case pinned here
    section_links([b.anchor for b in blocks if isinstance(b, Heading)], lang, case)
    carried = carried_query(lang)
    slugs = {c.slug for c in chapters.CHAPTERS if c.slug}
    anchor = "top"
    for block in blocks:
        if isinstance(block, Heading):
            anchor = block.anchor
            _heading(block, lang)
        elif isinstance(block, Text):
            st.markdown(for_language(localize_links(block.markdown, lang, slugs, carried), lang))
        elif isinstance(block, WidgetSlot):
            render_widget(block.name, Context(lang=lang, slug=slug, anchor=anchor, case=case))
        elif isinstance(block, ChapterList):
            _chapter_list(carried)
    _footer(chapter, lang, carried)
    st.html(SCROLL_SCRIPT, unsafe_allow_javascript=True)


def streamlit_translations(lang: str) -> list[tuple[str, str]]:
    """(regular expression, replacement) for each string Streamlit's front end shows in
    English (content/ui/<lang>/streamlit.toml), for assets/frame.html to rewrite on the page."""
    if lang == "en":
        return []
    pairs = []
    for key, english in catalog("en").items():
        if key.startswith("streamlit."):
            names = re.findall(r"\{(\w+)\}", english)
            pattern = "^" + re.sub(r"\\\{(\w+)\\\}", "(.*)", re.escape(english)) + "$"
            replacement = text(key, lang)
            for index, name in enumerate(names, start=1):
                replacement = replacement.replace("{" + name + "}", f"${index}")
            pairs.append((pattern, replacement))
    return pairs


def _frame(chapter: Chapter, lang: str, blocks) -> None:
    st.html(STYLE)
    # What the script needs: the notice for a missing section, the page's language (the
    # document's lang: screen readers, translation prompts) and the link's refused parameters
    # (taken out of the address bar, keeping its #section), Streamlit's own strings translated.
    data = (f'<div hidden data-guide-missing-section="{html.escape(t("frame.unknown_section"))}" '
            f'data-guide-page-lang="{html.escape(lang)}" data-guide-drop-params="{html.escape(dropped())}" '
            f'data-guide-translate="{html.escape(json.dumps(streamlit_translations(lang), ensure_ascii=False))}">'
            '</div>')
    st.html(data + _asset(FRAME_SCRIPT), unsafe_allow_javascript=True)
    with st.sidebar:
        st.markdown(f"**{t('frame.guide_title')}**")
        _language_switch(lang, blocks)
        for entry in chapters.CHAPTERS:
            st.page_link(entry.page, label=entry.title(lang), icon=entry.icon, query_params=carried_query(lang))
        st.divider()
        st.caption(t("frame.sections"))
        for block in blocks:
            if isinstance(block, Heading) and block.level == 2:
                st.markdown(f"[{for_language(block.text, lang)}](#{block.anchor})")


def _language_switch(lang: str, blocks) -> None:
    ids = [b.anchor for b in blocks if isinstance(b, Heading)]
    selector = ", ".join(f"#{anchor}" for anchor in ids) or "#none"
    links = " · ".join(
        f'<b>{LANGUAGE_NAMES[code]}</b>' if code == lang else
        f'<a href="?lang={code}" data-guide-lang="{code}" target="_self">{LANGUAGE_NAMES[code]}</a>'
        for code in LANGUAGE_NAMES
    )
    st.html(f'<div class="guide-lang" data-guide-sections="{html.escape(selector)}">{links}</div>'
            + _asset(SWITCH_SCRIPT), unsafe_allow_javascript=True)


def _heading(block: Heading, lang: str) -> None:
    title = for_language(block.text, lang)
    if block.level <= 2:
        st.header(title, anchor=block.anchor)
    else:
        st.subheader(title, anchor=block.anchor)


def _chapter_list(carried: dict[str, str]) -> None:
    lang = carried["lang"]
    for entry in chapters.CHAPTERS:
        if entry.slug:
            st.page_link(entry.page, label=entry.title(lang), icon=entry.icon, query_params=carried)


def _footer(chapter: Chapter, lang: str, carried: dict[str, str]) -> None:
    previous, following = chapters.neighbours(chapter.slug)
    st.divider()
    with st.container(key="nav-footer", horizontal=True, horizontal_alignment="distribute"):
        if previous is not None:
            st.page_link(previous.page, label=t("frame.previous", title=previous.title(lang)),
                         icon=":material/arrow_back:", query_params=carried)
        if chapter.slug:
            st.page_link(chapters.HOME.page, label=t("frame.home"), icon=":material/home:", query_params=carried)
        if following is not None:
            st.page_link(following.page, label=t("frame.next", title=following.title(lang)),
                         icon=":material/arrow_forward:", icon_position="right", query_params=carried)
