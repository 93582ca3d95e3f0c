"""The reader's case remembered in their browser (issue 26.5): the model and GPU they chose
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
STATE = "remembered_case"  # session: {"save": {...} | None, "forget": bool, "applied": bool}

_COMPONENT = st.components.v2.component(
    "guide.remembered_case", html="<div aria-hidden='true'></div>",
    js=(ROOT / "assets" / "remembered_case.js").read_text(encoding="utf-8"))


def _session() -> dict:
    return st.session_state.setdefault(STATE, {"save": None, "forget": False, "applied": False})


def stored_case(raw: str | None) -> dict[str, str]:
    """What the browser reported, kept only where it reads as a case: known names, short
    strings (the case then checks each value as it checks a link's)."""
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {name: value[name].strip() for name in REMEMBERED
            if isinstance(value.get(name), str) and 0 < len(value[name].strip()) <= MAX_VALUE_CHARS}


def sync() -> dict[str, str] | None:
    """Mount the storage component with what to save or forget; return what the browser
    holds (None until it has answered, on the first run of a session)."""
    session = _session()
    with st._event:  # no space on the page (as streamlit-extras' own storage does)
        result = _COMPONENT(key="guide-remembered-case",
                            data={"save": session["save"], "forget": session["forget"]},
                            default={"stored": "", "ready": False},
                            on_stored_change=lambda: None, on_ready_change=lambda: None, height=0)
    return stored_case(result.stored) if result.ready else None


def apply(stored: dict[str, str] | None, query_names_present: bool) -> bool:
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
    session.update(save={name: values[name] for name in REMEMBERED if values.get(name)}, forget=False,
                   applied=True)


def pending() -> bool:
    """The reader chose a case this session (the browser may not have answered yet)."""
    return bool(_session()["save"])


def forget() -> None:
    session = _session()
    session.update(save=None, forget=True, applied=True)
