"""guide/heap.py: what imports built is frozen, so Streamlit's full collection after every run
walks only what runs made. Each check runs in a fresh interpreter (a freeze is for the
process's life, and pytest's own objects are not the server's)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.browser import ROOT


def run_python(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_page_run_leaves_what_imports_built_out_of_the_collection():
    found = run_python("""
        import gc, json
        from streamlit.testing.v1 import AppTest
        page = AppTest.from_file("Home.py", default_timeout=60)
        page.query_params["lang"] = "en"
        page.run()
        page.run()  # the second run freezes what the first imported
        assert not page.exception
        gc.collect()
        print(json.dumps({"frozen": gc.get_freeze_count(), "walked": len(gc.get_objects())}))
    """)
    # Streamlit, plotly and the engine's modules: tens of thousands of objects, none walked again.
    assert found["frozen"] > 50_000
    assert found["walked"] < found["frozen"] / 4


def test_frozen_only_after_imports_and_garbage_still_freed():
    found = run_python("""
        import gc, json, weakref
        from guide.heap import freeze_what_imports_built

        class Node:
            pass

        kept = Node()
        kept.self = kept  # a cycle alive when frozen
        probe = weakref.ref(kept)
        first = freeze_what_imports_built()
        again = freeze_what_imports_built()  # nothing imported since
        import colorsys  # noqa: F401
        after_import = freeze_what_imports_built()
        plain = Node()
        plain_ref = weakref.ref(plain)
        gc.freeze()
        del plain  # frozen, no cycle: reference counting frees it
        cycle = Node()
        cycle.self = cycle
        cycle_ref = weakref.ref(cycle)
        del cycle  # made after the freezes: the collector still finds it
        gc.collect()
        print(json.dumps({"first": first, "again": again, "after_import": after_import,
                          "plain_freed": plain_ref() is None, "cycle_freed": cycle_ref() is None,
                          "frozen_alive": probe() is not None}))
    """)
    assert found == {"first": True, "again": False, "after_import": True, "plain_freed": True,
                     "cycle_freed": True, "frozen_alive": True}
