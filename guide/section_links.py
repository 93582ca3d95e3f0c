""""Link to this section", made in the reader's browser (assets/section_links.js).

A link a reader copies pins the chapter's whole case (guide/case.py: pinned_pairs), so it
changes with every case change. Drawn by Streamlit, each heading's link was three elements
(a popover, its caption, its address) sent again on every run: about a tenth of a chapter's
elements, paid for by the server and the browser on each case change (docs/benchmarks.md, "A case change
in the browser"). Here one element per page carries the pinned case; the script puts a link
button under each heading and writes the address when the reader opens it: the page's own
address and path, `lang` and the pinned case, the other values the address bar holds (every
calculator's, as the reader set them), then `#section`.
"""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st
import streamlit.components.v2

from guide.case import CASE_PARAMS
from guide.case_bar import pinned_link_pairs
from guide.chapters import ROOT
from guide.i18n import t

SECTION_LINKS_COMPONENT = "guide.section_links"

_COMPONENT = st.components.v2.component(
    SECTION_LINKS_COMPONENT, html="<div hidden></div>",
    js=(ROOT / "assets" / "section_links.js").read_text(encoding="utf-8"),
    isolate_styles=False)  # the buttons live beside the headings, styled by assets/guide.css


def pinned_query(lang: str, case=None) -> str:
    """What every link to a section of this page starts with: the language, then the chapter's
    case with its defaults written out (a link posted today means the same when a default
    changes), and the other case names the address carries."""
    return urlencode(pinned_link_pairs(lang, case))


def section_links(anchors: list[str], lang: str, case=None) -> None:
    """One element, taking no space, that gives each of these headings its link."""
    data = {"pinned": pinned_query(lang, case), "pinnedNames": ["lang", *CASE_PARAMS], "anchors": anchors,
            "label": t("frame.section_link"), "help": t("frame.section_link_help"),
            "copy": t("frame.copy"), "copied": t("frame.copied")}
    with st._event:  # no space on the page (guide/remembered.py does the same)
        _COMPONENT(key="guide-section-links", data=data, height=0)
