"""The router: st.navigation over the chapter registry, in the reader's language."""

from __future__ import annotations

import streamlit as st

from guide import chapters
from guide.heap import freeze_what_imports_built
from guide.i18n import current_language


def run() -> None:
    freeze_what_imports_built()  # Streamlit's collection after each run then walks only what runs made
    # No page_title: the browser tab shows the chapter title, in the reader's language.
    st.set_page_config(page_icon=":material/memory:", layout="centered")
    lang = current_language()
    pages = [
        st.Page(chapter.page, title=chapter.title(lang), icon=chapter.icon,
                url_path=chapter.slug or None, default=not chapter.slug)
        for chapter in chapters.CHAPTERS
    ]
    # The sidebar is ours (it keeps ?lang= on every link), so Streamlit's own menu is hidden.
    # Page files live in chapter_pages/, not pages/: a pages/ folder makes Streamlit start
    # in its old multipage mode, and the first visitor after a restart who opens a chapter
    # directly gets a "Page not found" dialog (streamlit/streamlit#8860).
    page = st.navigation(pages, position="hidden")
    st.session_state["unknown_page"] = unknown_page_requested(page.url_path)
    page.run()


def unknown_page_requested(served_path: str) -> str | None:
    """The page name the browser asked for when Streamlit fell back to the home page because
    no chapter has it (/nope): the home page then says so in the reader's language."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    try:
        wanted = get_script_run_ctx().pages_manager.intended_page_name
    except AttributeError:  # not in a script run, or a Streamlit without this attribute
        return None
    known = {chapter.slug for chapter in chapters.CHAPTERS}
    if served_path == "" and isinstance(wanted, str) and wanted and wanted not in known:
        return wanted
    return None
