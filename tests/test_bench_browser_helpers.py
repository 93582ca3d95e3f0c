"""The browser benchmarks' pure parts: which changes count once every reader's page is drawn,
and which values a calculator's own number takes (within its bounds, each different from the
one before, so every change changes the page)."""

from __future__ import annotations

import pytest

from bench.case_change_browser import after_every_load
from bench.own_input_browser import values_to_type


def test_only_changes_begun_after_every_page_was_drawn_count():
    readers = [{"loaded_at": 1.0, "started_at": [1.5, 3.0, 5.0], "changes": [0.1, 0.2, 0.3]},
               {"loaded_at": 4.0, "started_at": [4.5, 6.0], "changes": [0.4, 0.5]}]
    assert after_every_load(readers) == [0.3, 0.4, 0.5]
    assert after_every_load([*readers, {"loaded_at": None, "started_at": [], "changes": []}]) == []


def test_own_values_stay_in_bounds_and_always_change():
    assert values_to_type("0.9", "0.05", "1", "0.01", 3) == ["0.91", "0.92", "0.93"]
    assert values_to_type("", "0.05", "1", "0.01", 2) == ["0.05", "0.06"]  # an empty share starts at its lowest
    assert values_to_type("8", "1", "8", "1", 3) == ["7", "6", "5"]  # at the top: downward
    values = values_to_type("2", "1", "3", "", 6)
    assert all(1 <= float(v) <= 3 for v in values)
    assert all(a != b for a, b in zip(["2", *values], values))


def _recorded_rerun(*widgets) -> bytes:
    from streamlit.proto.BackMsg_pb2 import BackMsg

    message = BackMsg()
    message.rerun_script.query_string = "lang=en"
    message.rerun_script.cached_message_hashes.extend(["a1", "b2"])
    for widget_id, kind, value in widgets:
        state = message.rerun_script.widget_states.widgets.add()
        state.id = widget_id
        setattr(state, kind, value)
    return message.SerializeToString()


def test_a_reader_without_a_browser_sends_its_own_case_value_and_keeps_the_rest():
    from streamlit.proto.BackMsg_pb2 import BackMsg

    from bench.protocol_reader import with_case_value

    recorded = _recorded_rerun(("$$ID-1f-case_batch", "int_value", 4), ("$$ID-2e-case_gpu", "string_value", "h100"),
                               ("$$ID-3d-lo_rank", "int_value", 16))
    sent = BackMsg()
    sent.ParseFromString(with_case_value(recorded, "batch", "37"))
    states = {w.id: w for w in sent.rerun_script.widget_states.widgets}
    assert states["$$ID-1f-case_batch"].int_value == 37
    assert states["$$ID-2e-case_gpu"].string_value == "h100" and states["$$ID-3d-lo_rank"].int_value == 16
    assert list(sent.rerun_script.cached_message_hashes) == []  # it keeps no message: all are sent in full
    sent.ParseFromString(with_case_value(recorded, "gpu", "l4"))
    assert {w.id: w for w in sent.rerun_script.widget_states.widgets}["$$ID-2e-case_gpu"].string_value == "l4"
    with pytest.raises(ValueError, match="case_users"):
        with_case_value(recorded, "users", "3")


def test_a_table_row_gives_median_and_p95_in_ms_and_nan_for_a_chapter_without_times():
    import math

    from bench.case_change_browser import median_p95_ms

    assert median_p95_ms([0.1, 0.3, 0.2, 0.4, 2.0]) == (pytest.approx(300.0), pytest.approx(2000.0))
    assert all(math.isnan(value) for value in median_p95_ms([]))
