"""Render a chapter: the shared frame, its sections with fixed anchors, widgets where their
markers stand, previous/home/next from the registry, and scrolling to the URL's section."""

from __future__ import annotations

from functools import lru_cache
import json

import streamlit as st

from guide import chapters
from guide.chapters import Chapter
from guide.format import escape_markdown
from guide.i18n import LANGUAGE_NAMES, current_language, remember_language, t
from guide.markdown import ChapterList, Heading, Text, WidgetSlot, localize_links, parse
from guide.widgets import Context, render_widget

# Headings land below Streamlit's top bar; links to sections keep the reader's language.
_STYLE = """<style>
h1[id], h2[id], h3[id], h4[id] { scroll-margin-top: 4.5rem; }
.guide-missing-section { position: fixed; top: 4rem; left: 50%; transform: translateX(-50%); z-index: 1000;
  background: #fff4e5; color: #663c00; border: 1px solid #ffb74d; border-radius: 0.5rem; padding: 0.6rem 1rem; }
.st-key-nav-footer a p { font-size: 1rem; }
</style>"""

# One script for the whole session, installed before any chapter text is drawn:
# - keepInView(section): Streamlit scrolls to the URL's #section only on a tab's first load,
#   and not after moving inside the app or when the content above the heading takes its
#   height late (charts, calculators). This scrolls to the heading and keeps it in place
#   until it has stayed there with the page idle, or the reader scrolls or clicks. A section
#   that does not exist is said so, in the reader's language. Called after every render for
#   the URL's #section, and on every change of #section within a page.
# - links between chapters stay in the same tab (Streamlit opens markdown links in new ones);
# - Streamlit's "Page not found" dialog, in English only, is closed: the page says it instead.
_FRAME_SCRIPT = """<script>
(function () {
  window.__guideMissingSection = MISSING_SECTION;
  if (window.__guideFrame) { return; }
  window.__guideFrame = true;

  window.__guideKeepInView = function (target) {
    const key = window.location.pathname + window.location.search + "#" + target;
    if (!target || window.__guideScrolledTo === key || window.__guideScrolling === key) { return; }
    window.__guideScrolling = key;
    let tries = 0, steady = 0, moved = false;
    const stop = function () { moved = true; };
    ["wheel", "touchstart", "keydown", "mousedown"].forEach(function (name) {
      window.addEventListener(name, stop, {once: true, passive: true});
    });
    const timer = setInterval(function () {
      const heading = document.getElementById(target);
      const done = function () {
        window.__guideScrolledTo = key;
        if (window.__guideScrolling === key) { window.__guideScrolling = null; }
        clearInterval(timer);
      };
      const here = window.location.pathname + window.location.search + window.location.hash;
      const running = !!document.querySelector("[data-testid='stStatusWidget']");
      // Give up after 15 s, or 60 s while the page is still running (a cold server building
      // a calculator above the section can take that long).
      tries++;
      if (moved || tries > 600 || (tries > 150 && !running)
          || decodeURIComponent(here) !== decodeURIComponent(key)) { return done(); }
      if (!heading) {
        if (tries === 30) {  // 3 s and still no such heading: say so, stay where we are
          const note = document.createElement("div");
          note.setAttribute("role", "status");
          note.className = "guide-missing-section";
          note.textContent = window.__guideMissingSection.replace("{section}", target.slice(0, 60));
          document.body.appendChild(note);
          setTimeout(function () { note.remove(); }, 10000);
          done();
        }
        return;
      }
      const top = heading.getBoundingClientRect().top;
      const wanted = parseFloat(getComputedStyle(heading).scrollMarginTop) || 0;
      if (Math.abs(top - wanted) > 4) {
        heading.scrollIntoView({block: "start"});
        steady = 0;
      } else if (++steady >= 8 && tries > 30 && !running) {
        done();  // in place for 0.8 s, 3 s passed and the page is idle: what is above has its height
      }
    }, 100);
  };
  window.addEventListener("hashchange", function () {
    window.__guideKeepInView(decodeURIComponent(window.location.hash.slice(1)));
  });

  const tidy = function () {
    document.querySelectorAll("[data-testid='stMarkdownContainer'] a[target='_blank']").forEach(function (link) {
      const href = link.getAttribute("href") || "";
      if (!/^[a-z][a-z0-9+.-]*:/i.test(href) && !href.startsWith("//")) {
        link.removeAttribute("target");
        link.removeAttribute("rel");
      }
    });
    document.querySelectorAll(".stDialog [role='dialog']").forEach(function (dialog) {
      const title = dialog.querySelector("h2");
      const close = dialog.querySelector("button[aria-label='Close']");
      if (title && title.textContent === "Page not found" && close) { close.click(); }
    });
  };
  new MutationObserver(tidy).observe(document.body, {childList: true, subtree: true,
                                                     attributes: true, attributeFilter: ["target"]});
  tidy();
  // A plain click on a link to another chapter opens it here, whatever the link's target.
  document.addEventListener("click", function (event) {
    const link = event.target.closest ? event.target.closest("[data-testid='stMarkdownContainer'] a[href]") : null;
    const href = link ? link.getAttribute("href") || "" : "";
    if (!link || /^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith("//") || href.startsWith("#")) { return; }
    if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) { return; }
    event.preventDefault();
    window.location.assign(link.href);
  }, true);
})();
</script>"""

# After every render: bring the URL's #section into view (a new page, or content moved).
_SCROLL_CALL = """<script>
if (window.__guideKeepInView) { window.__guideKeepInView(decodeURIComponent(window.location.hash.slice(1))); }
</script>"""

# The language switch keeps the page, the calculator values and the section in view: it
# reloads the same URL with the other language and the nearest heading above as #fragment.
_SWITCH_SCRIPT = """<script>
(function () {
  document.querySelectorAll("a[data-guide-lang]").forEach(function (link) {
    if (link.dataset.bound) { return; }
    link.dataset.bound = "1";
    link.addEventListener("click", function (event) {
      event.preventDefault();
      const url = new URL(window.location.href);
      url.searchParams.set("lang", link.dataset.guideLang);
      let section = "";
      document.querySelectorAll(SECTION_SELECTOR).forEach(function (heading) {
        if (heading.getBoundingClientRect().top < 120) { section = heading.id; }
      });
      url.hash = section;
      window.location.assign(url.toString());
    });
  });
})();
</script>"""


@lru_cache(maxsize=32)
def _blocks(chapter_name: str, lang: str):
    return parse((chapters.CONTENT / lang / f"{chapter_name}.md").read_text(encoding="utf-8"))


def page_link_target(chapter: Chapter) -> str:
    return chapter.page


def render_page(slug: str) -> None:
    chapter = chapters.by_slug(slug)
    lang = current_language()
    unknown = remember_language(lang)
    blocks = _blocks(chapter.content_name, lang)
    st.title(chapter.title(lang), anchor=False)  # first, so the reader sees the page at once
    _frame(chapter, lang, blocks)
    if unknown is not None:
        st.warning(t("frame.unknown_language", asked=escape_markdown(unknown, 20)))
    missing_page = st.session_state.get("unknown_page") if not slug else None
    if missing_page:
        st.warning(t("frame.unknown_page", page=escape_markdown(missing_page, 60)))
    slugs = {c.slug for c in chapters.CHAPTERS if c.slug}
    anchor = "top"
    for block in blocks:
        if isinstance(block, Heading):
            anchor = block.anchor
            _heading(block, chapter, lang)
        elif isinstance(block, Text):
            st.markdown(localize_links(block.markdown, lang, slugs))
        elif isinstance(block, WidgetSlot):
            render_widget(block.name, Context(lang=lang, slug=slug, anchor=anchor))
        elif isinstance(block, ChapterList):
            _chapter_list(lang)
    _footer(chapter, lang)
    st.html(_SCROLL_CALL, unsafe_allow_javascript=True)


def _frame(chapter: Chapter, lang: str, blocks) -> None:
    st.html(_STYLE)
    st.html(_FRAME_SCRIPT.replace("MISSING_SECTION", json.dumps(t("frame.unknown_section"))),
            unsafe_allow_javascript=True)
    with st.sidebar:
        st.markdown(f"**{t('frame.guide_title')}**")
        _language_switch(lang, blocks)
        for entry in chapters.CHAPTERS:
            st.page_link(entry.page, label=entry.title(lang), icon=entry.icon, query_params={"lang": lang})
        st.divider()
        st.caption(t("frame.sections"))
        for block in blocks:
            if isinstance(block, Heading) and block.level == 2:
                st.markdown(f"[{block.text}](#{block.anchor})")


def _language_switch(lang: str, blocks) -> None:
    ids = [b.anchor for b in blocks if isinstance(b, Heading)]
    selector = ", ".join(f"#{anchor}" for anchor in ids) or "#none"
    links = " · ".join(
        f'<b>{LANGUAGE_NAMES[code]}</b>' if code == lang else
        f'<a href="?lang={code}" data-guide-lang="{code}" target="_self">{LANGUAGE_NAMES[code]}</a>'
        for code in LANGUAGE_NAMES
    )
    script = _SWITCH_SCRIPT.replace("SECTION_SELECTOR", json.dumps(selector))
    st.html(f'<div class="guide-lang">{links}</div>{script}', unsafe_allow_javascript=True)


def _heading(block: Heading, chapter: Chapter, lang: str) -> None:
    if block.level <= 2:
        st.header(block.text, anchor=block.anchor)
    else:
        st.subheader(block.text, anchor=block.anchor)
    url = f"{st.context.url or ''}?lang={lang}#{block.anchor}"
    with st.popover(t("frame.section_link"), icon=":material/link:", type="tertiary"):
        st.caption(t("frame.section_link_help"))
        st.code(url, language=None, wrap_lines=True)


def _chapter_list(lang: str) -> None:
    for entry in chapters.CHAPTERS:
        if entry.slug:
            st.page_link(entry.page, label=entry.title(lang), icon=entry.icon, query_params={"lang": lang})


def _footer(chapter: Chapter, lang: str) -> None:
    previous, following = chapters.neighbours(chapter.slug)
    st.divider()
    with st.container(key="nav-footer", horizontal=True, horizontal_alignment="distribute"):
        if previous is not None:
            st.page_link(previous.page, label=t("frame.previous", title=previous.title(lang)),
                         icon=":material/arrow_back:", query_params={"lang": lang})
        if chapter.slug:
            st.page_link(chapters.HOME.page, label=t("frame.home"), icon=":material/home:",
                         query_params={"lang": lang})
        if following is not None:
            st.page_link(following.page, label=t("frame.next", title=following.title(lang)),
                         icon=":material/arrow_forward:", icon_position="right", query_params={"lang": lang})
