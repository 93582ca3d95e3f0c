"""Entry point: `streamlit run Home.py` (or `make run`).

Streamlit first reads this file to find the web app (`app = st.App(...)`, outside any reader's
session): its own server with the guide's HTTP rules (guide/http.py: unknown deep paths, the
metrics endpoint, security headers). Then, for every reader, it runs this same file as the
page script, which draws the guide (guide/app.py).
"""

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

if get_script_run_ctx(suppress_warning=True) is None:  # the server reading this file for its web app
    from starlette.middleware import Middleware

    from guide.http import GuideMiddleware

    app = st.App(__file__, middleware=[Middleware(GuideMiddleware)])
else:  # a reader's page
    from guide.app import run

    run()
