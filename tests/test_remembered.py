"""The reader's case remembered in the browser (guide/remembered.py): what the browser reports
is read as untrusted text, a link that names a case value wins, and the memory is applied once
per session. The browser side is tests/test_browser_case_glance.py."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from guide.remembered import MAX_VALUE_CHARS, read_stored


def stored_case(raw) -> dict:
    return read_stored(raw)[0]


def test_only_short_strings_under_known_names_are_read():
    assert stored_case(json.dumps({"model": "llama-3.1-8b", "gpu": " h100 "})) == {"model": "llama-3.1-8b",
                                                                                    "gpu": "h100"}
    assert stored_case(json.dumps({"gpu": "h100", "batch": "9", "dtype": "float32"})) == {"gpu": "h100"}
    assert stored_case(json.dumps({"model": "x" * (MAX_VALUE_CHARS + 1), "gpu": 4090})) == {}
    assert stored_case(json.dumps({"model": "", "gpu": ["h100"]})) == {}
    for raw in ("", None, "not json", "[1, 2]", '"h100"', "null", "{"):
        assert stored_case(raw) == {}


def _script(stored: dict, names_present: bool) -> None:
    import streamlit as st

    from guide import remembered

    for _ in range(2):  # a second run in the same session: applied once only
        st.session_state.setdefault("answers", []).append(remembered.apply(stored, names_present))
    st.session_state["query"] = dict(st.query_params)


def _run(stored: dict, names_present: bool, **query) -> AppTest:
    at = AppTest.from_function(_script, args=(stored, names_present))
    at.query_params.update(query)
    return at.run()


def test_the_remembered_case_fills_an_address_without_a_case_once():
    at = _run({"model": "qwen2.5-7b", "gpu": "h100"}, False, lang="fr")
    assert at.session_state["answers"] == [True, False]
    assert at.session_state["query"] == {"lang": "fr", "model": "qwen2.5-7b", "gpu": "h100"}


def test_a_link_that_names_a_case_value_keeps_its_own():
    at = _run({"model": "qwen2.5-7b", "gpu": "h100"}, True, lang="en", gpu="rtx4090")
    assert at.session_state["answers"] == [False, False]
    assert at.session_state["query"] == {"lang": "en", "gpu": "rtx4090"}


def test_nothing_remembered_changes_nothing():
    at = _run({}, False, lang="en")
    assert at.session_state["answers"] == [False, False]
    assert at.session_state["query"] == {"lang": "en"}


def _choose_then_forget() -> None:
    import streamlit as st

    from guide import remembered

    remembered.remember({"model": "qwen2.5-7b", "gpu": "", "dtype": "float32"})
    st.session_state["after_choice"] = dict(st.session_state[remembered.STATE])
    remembered.forget()
    st.session_state["after_forget"] = dict(st.session_state[remembered.STATE])


def test_a_choice_is_saved_and_forget_clears_it():
    at = AppTest.from_function(_choose_then_forget).run()
    chosen, forgotten = at.session_state["after_choice"], at.session_state["after_forget"]
    assert chosen["save"] == {"model": "qwen2.5-7b"} and not chosen["forget"]  # only the model and GPU, when set
    assert json.loads(chosen["known"]) == {"model": "qwen2.5-7b"}  # the browser will not need to say it back
    assert forgotten["save"] is None and forgotten["forget"] and forgotten["known"] == ""


def test_a_tampered_report_is_dropped_never_raised():
    from guide.remembered import MAX_STORED_CHARS, read_stored

    nested = '{"model": ' + "[" * 100_000 + "]" * 100_000 + "}"  # json's parser recursed until it failed
    for raw in (nested, '{"model": [[["x"]]]}', '{"gpu": {"a": 1}}', "x" * (MAX_STORED_CHARS + 1), "{" * 5000,
                '{"dropped": true}', 12, b"{}"):
        assert read_stored(raw) == ({}, True), str(raw)[:40]
    assert read_stored('{"model": "qwen2.5-7b", "batch": [[1]]}') == ({"model": "qwen2.5-7b"}, False)  # not ours: ignored
    assert read_stored("") == ({}, False) and read_stored(None) == ({}, False)


def test_a_report_that_is_not_a_case_is_dropped_and_said_once_taken():
    from guide.remembered import take_report

    session = {"save": None, "forget": False, "applied": False, "known": "", "report": "", "dropped": False}
    assert take_report(session, '{"dropped": true}') == {}
    assert session["dropped"] and session["forget"] and session["known"] == ""  # the browser clears it
    assert take_report(session, '{"dropped": true}') == {} and session["dropped"]  # the same report: no news
    fresh = {**session, "report": "", "dropped": False, "forget": False}
    assert take_report(fresh, '{"model": "qwen2.5-7b"}') == {"model": "qwen2.5-7b"} and not fresh["dropped"]
