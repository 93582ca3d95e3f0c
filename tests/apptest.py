"""Helpers to run the guide's pages with AppTest (no browser)."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from guide import chapters
from guide.charts import CHART_COMPONENT
from guide.section_links import SECTION_LINKS_COMPONENT
from tests.conftest import ROOT


def open_page(slug: str, lang: str | None = "en", locale: str | None = None, **query: str) -> AppTest:
    """Run the app on a chapter, as a browser opening /<slug>?lang=..&query.. would."""
    at = AppTest.from_file(str(ROOT / "Home.py"), default_timeout=90)
    at.query_params.update({**({"lang": lang} if lang else {}), **query})
    at.context = {"url": f"http://localhost:8501/{slug}", **({"locale": locale} if locale else {})}
    if slug:
        # The chapter's first run is the page itself, as when a browser opens /<slug>: st.Page
        # names a page by calc_hash(url_path) (streamlit/navigation/page.py), and AppTest runs
        # the page whose hash it holds. switch_page() needs a run of the home page first (it
        # matches pages st.navigation registered), which doubled each chapter's cost.
        assert chapters.by_slug(slug).slug == slug
        at._page_hash = calc_hash(slug)
    at.run()
    return at


def is_link(text: str) -> bool:
    """A link a reader copies (the share box, "link to this section"): it echoes every URL
    parameter, so it would change with any input whether or not a result does."""
    return text.startswith(("http://", "https://", "/")) or "?lang=" in text


def open_own_case(at: AppTest, *keys: str) -> AppTest:
    """Open a calculator's "change for this calculator only" panel (guide/inputs/common.py
    case_inputs), as a reader's click does; `keys` are the calculator's URL keys, in its order.
    Closed, and with no value from the link, the panel draws no inputs."""
    from guide.inputs.common import own_case_key

    at.session_state[own_case_key(keys)] = True
    return at.run()


def section_links(at: AppTest) -> dict:
    """What the page gives its "Link to this section" buttons (guide/section_links.py): the
    pinned query every link starts with, the names it pins, the headings' anchors, the texts."""
    [element] = [e.proto for e in at.get("bidi_component") if e.proto.component_name == SECTION_LINKS_COMPONENT]
    return json.loads(element.json)


def section_link(at: AppTest, anchor: str) -> str:
    """The link assets/section_links.js makes for a section, from the page's address in the
    browser (`at.context`'s URL) when the address bar carries nothing beyond the case."""
    data = section_links(at)
    assert anchor in data["anchors"]
    return f"{at.context['url']}?{data['pinned']}#{anchor}"


def chart_elements(at: AppTest) -> list:
    """The page's chart elements (guide/charts.py), in page order: each its component's proto,
    whose `json` holds the figure, plotly.js's source and the message if it cannot load."""
    return [element.proto for element in at.get("bidi_component") if element.proto.component_name == CHART_COMPONENT]


def chart_specs(at: AppTest) -> list[dict]:
    """The figures the page draws, as plotly.js gets them, in page order."""
    return [json.loads(json.loads(chart.json)["figure"]) for chart in chart_elements(at)]


def chart_data(spec: dict) -> str:
    """A chart as drawn: its traces, and the lines, marks and axis ranges of its layout."""
    layout = spec.get("layout", {})
    drawn = {key: layout[key] for key in ("shapes", "annotations") if key in layout}
    drawn.update({key: layout[key].get("range") for key in layout if key.startswith(("xaxis", "yaxis"))})
    return repr((spec.get("data", []), drawn))


def fingerprint(at: AppTest) -> str:
    """Everything a reader sees as results: metrics, text, whole tables, alerts and chart
    data; never the links that echo the URL."""
    parts = [m.value for m in at.metric] + [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [d.value.to_csv(index=False) for d in at.dataframe]
    parts += [c.value for c in at.code if not is_link(c.value)]
    parts += [a.value for kind in (at.success, at.info, at.warning, at.error) for a in kind]
    parts += [chart_data(spec) for spec in chart_specs(at)]
    return "\n".join(parts)


def texts(at: AppTest) -> str:
    """All visible text of the page, for language checks."""
    parts = [t.value for t in at.title] + [h.value for h in at.header] + [h.value for h in at.subheader]
    return "\n".join(parts) + "\n" + fingerprint(at)
