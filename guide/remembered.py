"""The reader's case remembered in their browser: the model and GPU they chose
last come back when they open a chapter without a case in its link, and "Forget my case"
clears them. Stored in the browser's localStorage (assets/remembered_case.js), never on the
server; a link that names any case value opens exactly as written.

streamlit-extras' local_storage_manager was read and not used: it keys its storage by the
page's path, so a case chosen in /oom would not come back in /serving or on the home page.
"""

from __future__ import annotations

import json

import streamlit as st
import streamlit.components.v2

from guide.chapters import ROOT

REMEMBERED = ("model", "gpu")  # what the guide keeps: the reader's model and card
MAX_VALUE_CHARS = 200  # a model id or a card key; anything longer is not ours
# What the browser may report at all: the two values and their JSON, with room to spare. Anyone
# can write into localStorage (an extension, a tampered profile): a report longer than this, or
# nested (a "model" of [[[[...]]]] made json's parser recurse until it failed), is dropped.
MAX_STORED_CHARS = 2048
# session: what to save, whether to forget, whether the memory was applied, what the browser
# holds as far as the server knows, and the browser's last report
STATE = "remembered_case"

_COMPONENT = st.components.v2.component(
    "guide.remembered_case", html="<div aria-hidden='true'></div>",
    js=(ROOT / "assets" / "remembered_case.js").read_text(encoding="utf-8"))


def _session() -> dict:
    return st.session_state.setdefault(STATE, {"save": None, "forget": False, "applied": False, "known": "",
                                                "report": "", "dropped": False})


def read_stored(raw: object) -> tuple[dict[str, str], bool]:
    """(the case the report holds: known names, short strings, which the case then checks as it
    checks a link's; and whether the browser held something that is not a case:
    too long, not JSON, nested, a remembered name holding anything but a short string, or the
    browser's own word that it dropped such a thing). Never raises, whatever the report."""
    if not raw:
        return {}, False
    if not isinstance(raw, str) or len(raw) > MAX_STORED_CHARS:
        return {}, True
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {}, True
    if not isinstance(value, dict) or value.get("dropped") is True:
        return {}, True
    case = {name: value[name].strip() for name in REMEMBERED
            if isinstance(value.get(name), str) and 0 < len(value[name].strip()) <= MAX_VALUE_CHARS}
    return case, any(name in value and name not in case for name in REMEMBERED)


def sync() -> dict[str, str]:
    """Mount the storage component with what to save or forget and what the server believes
    the browser holds; return what it holds ({} until it has said, or when it holds nothing).
    The browser speaks only when it holds something the server does not know (one rerun)."""
    session = _session()
    with st._event:  # no space on the page (as streamlit-extras' own storage does)
        result = _COMPONENT(key="guide-remembered-case",
                            data={"save": session["save"], "forget": session["forget"], "known": session["known"]},
                            default={"stored": ""}, on_stored_change=lambda: None, height=0)
    return take_report(session, result.stored if isinstance(result.stored, str) else "")


def take_report(session: dict, report: str) -> dict[str, str]:
    """What the browser holds, once its report is taken in. A new report replaces what the
    server believed; an empty one is what a page switch leaves (Streamlit drops the component's
    state with the page), not news: another tab's "Forget" shows next session. A report that is
    not a case is dropped: the browser clears it on the next run, and the page says so."""
    if report and report != session["report"]:
        session.update(report=report[: MAX_STORED_CHARS + 1], known=report[: MAX_STORED_CHARS + 1])
    stored, bad = read_stored(session["known"])
    if bad:
        session.update(known="", forget=True, dropped=True)
    return stored


def apply(stored: dict[str, str], query_names_present: bool) -> bool:
    """Put the remembered case into the address once per session, when the link names no case
    value (a link's explicit values always win). True when it did."""
    session = _session()
    if not stored or session["applied"] or session["forget"]:
        return False
    session["applied"] = True
    if query_names_present:
        return False
    for name, value in stored.items():
        st.query_params[name] = value
    return True


def remember(values: dict[str, str]) -> None:
    """The reader chose these values: the browser keeps them from the next run on."""
    session = _session()
    save = {name: values[name] for name in REMEMBERED if values.get(name)}
    session.update(save=save, forget=False, applied=True, known=json.dumps(save, ensure_ascii=False), dropped=False)


def pending() -> bool:
    """The reader chose a case this session (the browser may not have answered yet)."""
    return bool(_session()["save"])


def forget() -> None:
    session = _session()
    session.update(save=None, forget=True, applied=True, known="", dropped=False)


def dropped() -> bool:
    """The browser held something that was not a case, and it is being cleared."""
    return bool(_session().get("dropped"))
