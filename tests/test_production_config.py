"""The settings a team deploys with (.streamlit/config.toml): safe by default."""

from __future__ import annotations

import tomllib

from tests.conftest import ROOT


def test_production_settings():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    server, client = config["server"], config["client"]
    assert server["headless"] is True
    assert server["enableXsrfProtection"] is True
    assert 0 < server["maxUploadSize"] <= 1  # MB: configs are small, anything big is refused
    assert config["browser"]["gatherUsageStats"] is False
    assert client["showErrorDetails"] == "none"  # never a traceback in the page
    assert server["fileWatcherType"] == "none" and server["runOnSave"] is False
    assert server["address"] == "127.0.0.1"  # loopback: readers come through the reverse proxy


def test_streamlit_serves_the_guides_web_app():
    """`streamlit run Home.py` finds the st.App of Home.py (guide/http.py's rules) and serves it."""
    from streamlit.web.server.app_discovery import discover_asgi_app

    found = discover_asgi_app(ROOT / "Home.py")
    assert found.is_asgi_app and found.app_name == "app"


def test_streamlit_reads_them():
    import streamlit.config as streamlit_config

    streamlit_config.get_config_options(force_reparse=True)
    assert streamlit_config.get_option("server.maxUploadSize") <= 1
    assert streamlit_config.get_option("browser.gatherUsageStats") is False
