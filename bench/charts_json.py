"""Every chart of every chapter, as the page sends it: a speed-up must not change
what a page shows. Each chapter is opened with AppTest in both languages, on its default case
and on a second one (another batch, or users, or GPU), and each chart's JSON (what plotly.js
gets: the chart component's figure, as st.plotly_chart's spec was before it) is written down;
two runs compare.

    python -m bench charts_json --save /tmp/after.json
    (cd /path/to/old/checkout && python -m bench charts_json --save /tmp/before.json)
    python -m bench charts_json --compare /tmp/before.json /tmp/after.json

About 2 minutes a run on the 2-core machine (10 chapters x 2 languages x 2 cases).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path


def _second_case(at) -> None:
    """The case changed as case_change does: its batch, else its users, else its GPU."""
    if any(w.key == "case_batch" for w in at.number_input):
        at.number_input(key="case_batch").set_value(3).run()
    elif any(w.key == "case_users" for w in at.number_input):
        at.number_input(key="case_users").set_value(3).run()
    elif any(w.key == "case_gpu" for w in at.selectbox):
        at.selectbox(key="case_gpu").set_value("h100").run()


def charts() -> dict[str, str]:
    """'<chapter> <lang> <case> <chart key or position>' -> the chart's JSON."""
    from guide import chapters
    from tests.apptest import open_page

    for name in list(logging.root.manager.loggerDict):
        if name.startswith("streamlit"):
            logging.getLogger(name).setLevel(logging.ERROR)
    found = {}
    for chapter in chapters.CHAPTERS:
        for lang in ("en", "fr"):
            at = open_page(chapter.slug, lang=lang)
            for case in ("default", "changed"):
                if case == "changed":
                    try:
                        _second_case(at)
                    except ValueError as error:  # AppTest cannot read back a select whose label it translated
                        found[f"{chapter.slug or 'home'} {lang} {case}"] = f"not changed: {error}"
                        continue
                for index, figure in enumerate(chart_figures(at)):
                    found[f"{chapter.slug or 'home'} {lang} {case} {index}"] = figure
    return found


def chart_figures(at) -> list[str]:
    """Each chart's figure JSON, in page order (guide/charts.py)."""
    from tests.apptest import chart_elements

    return [json.loads(chart.json)["figure"] for chart in chart_elements(at)]


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs between two runs, chart by chart (a missing chart included)."""
    lines = [f"{key}: only {'before' if key in before else 'after'}" for key in sorted(set(before) ^ set(after))]
    lines += [f"{key}: differs" for key in sorted(set(before) & set(after))
              if before[key] != after[key] and _read(before[key]) != _read(after[key])]
    return lines


def _read(spec: str):
    try:
        return json.loads(spec)
    except ValueError:
        return spec


def main(options: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench charts_json")
    parser.add_argument("--save", type=Path, help="write every chart's JSON to this file")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"), help="compare two saved runs")
    args = parser.parse_args(options or [])
    if args.compare:
        before, after = (json.loads(path.read_text(encoding="utf-8")) for path in args.compare)
        lines = differences(before, after)
        print(f"{len(before)} charts before, {len(after)} after: " + ("the same" if not lines else f"{len(lines)} differ"))
        for line in lines[:40]:
            print(f"  {line}")
        return
    if args.save is None:  # `python -m bench` runs every benchmark: this one needs a file
        print("charts_json: no --save or --compare given, nothing done")
        return
    found = charts()
    args.save.write_text(json.dumps(found, indent=0, sort_keys=True), encoding="utf-8")
    print(f"{len(found)} charts written to {args.save}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
