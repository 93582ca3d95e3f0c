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
.st-key-nav-footer a p { font-size: 1rem; }
</style>"""

# Streamlit scrolls to the URL's #section only on a tab's first load; after moving inside
# the app it does not. This scrolls once the section's heading exists, for every new URL.
# It also keeps links between chapters in the same tab: Streamlit opens every markdown link
# in a new one.
_PAGE_SCRIPT = """<script>
(function () {
  const target = decodeURIComponent(window.location.hash.slice(1));
  const key = window.location.pathname + window.location.search + "#" + target;
  if (target && window.__guideScrolledTo !== key) {
    let tries = 0;
    const timer = setInterval(function () {
      const heading = document.getElementById(target);
      if (heading) {
        heading.scrollIntoView({block: "start"});
        window.__guideScrolledTo = key;
        clearInterval(timer);
      } else if (++tries > 60) {
        clearInterval(timer);
      }
    }, 100);
  }
  if (!window.__guideLinkObserver) {
    const sameTab = function () {
      document.querySelectorAll("[data-testid='stMarkdownContainer'] a[target='_blank']").forEach(function (link) {
        const href = link.getAttribute("href") || "";
        if (!/^[a-z][a-z0-9+.-]*:/i.test(href) && !href.startsWith("//")) {
          link.removeAttribute("target");
          link.removeAttribute("rel");
        }
      });
    };
    window.__guideLinkObserver = new MutationObserver(sameTab);
    window.__guideLinkObserver.observe(document.body, {childList: true, subtree: true});
    sameTab();
  }
})();
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


# Following a link to another section of the same page only changes the #fragment: the
# browser jumps there, then charts above the section finish drawing and push it away. This
# keeps the heading in place for three seconds, unless the reader scrolls or clicks first.
_HASH_SCRIPT = """<script>
(function () {
  if (window.__guideHashWatch) { return; }
  window.__guideHashWatch = true;
  window.addEventListener("hashchange", function () {
    const target = decodeURIComponent(window.location.hash.slice(1));
    const started = window.location.hash;
    let ticks = 0, reader = false;
    const stop = function () { reader = true; };
    ["wheel", "touchstart", "keydown", "mousedown"].forEach(function (name) {
      window.addEventListener(name, stop, {once: true, passive: true});
    });
    const keep = setInterval(function () {
      const heading = target && document.getElementById(target);
      if (reader || !heading || window.location.hash !== started || ++ticks > 30) {
        clearInterval(keep);
        return;
      }
      const top = heading.getBoundingClientRect().top;
      if (top < 0 || top > window.innerHeight / 3) { heading.scrollIntoView({block: "start"}); }
    }, 100);
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
    st.html(_PAGE_SCRIPT, unsafe_allow_javascript=True)


def _frame(chapter: Chapter, lang: str, blocks) -> None:
    st.html(_STYLE)
    st.html(_HASH_SCRIPT, unsafe_allow_javascript=True)
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
