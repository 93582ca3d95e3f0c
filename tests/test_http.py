"""The guide's HTTP rules (guide/http.py), driven as ASGI calls: unknown deep paths are sent
to the page that says so, the metrics stay on this machine, every answer carries the
security headers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from guide.http import PLOTLY_PATH, GuideMiddleware, content_security_policy, security_headers


def call(path: str, client: str = "127.0.0.1", headers: list | None = None, method: str = "GET",
         query: bytes = b"", body: list | None = None) -> tuple[int, dict]:
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": b"streamlit"})

    sent = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": query,
             "client": (client, 40000), "headers": headers or []}
    asyncio.run(GuideMiddleware(app)(scope, None, send))
    start = sent[0]
    if body is not None:
        body.extend(m["body"] for m in sent[1:])
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}


@pytest.mark.parametrize("path,target", [
    ("/estimator/extra", "/estimator%2Fextra?lang=fr"),
    ("/a/b/c", "/a%2Fb%2Fc?lang=fr"),
    ("/slow-model/batch-size/", "/slow-model%2Fbatch-size?lang=fr"),
])
def test_unknown_deep_paths_go_to_the_page_that_says_so(path, target):
    status, headers = call(path, query=b"lang=fr")
    assert status == 302 and headers["location"] == target


@pytest.mark.parametrize("path", ["/", "/estimator", "/static/js/index.js", "/_stcore/health", "/_stcore/stream",
                                  "/media/abc.png", "/component/x/y", "/estimator/_stcore/health", "/estimator%2Fextra"])
def test_streamlit_s_own_paths_and_pages_pass(path):
    status, headers = call(path)
    assert status == 200 and headers["content-security-policy"] == content_security_policy()


def test_the_charts_plotly_js_is_the_installed_packages_gzipped_when_taken_and_kept_a_year():
    import gzip
    from importlib.resources import files

    shipped = files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    plain, packed = [], []
    status, headers = call(PLOTLY_PATH, body=plain)
    assert status == 200 and b"".join(plain) == shipped and "content-encoding" not in headers
    assert headers["content-type"].startswith("text/javascript") and int(headers["content-length"]) == len(shipped)
    assert "immutable" in headers["cache-control"] and headers["content-security-policy"] == content_security_policy()
    status, headers = call(PLOTLY_PATH, headers=[(b"accept-encoding", b"gzip, deflate, br")], body=packed)
    assert status == 200 and headers["content-encoding"] == "gzip" and gzip.decompress(b"".join(packed)) == shipped
    assert len(b"".join(packed)) < len(shipped) / 2 and headers["vary"] == "accept-encoding"
    head = []
    assert call(PLOTLY_PATH, method="HEAD", body=head)[0] == 200 and b"".join(head) == b""
    assert call(PLOTLY_PATH, method="POST")[0] == 200  # not ours: Streamlit answers
    assert call(PLOTLY_PATH.replace(".min.js", ".js"))[0] == 302  # any other file there is an unknown page


def test_streamlit_s_scripts_and_styles_go_gzipped_to_a_browser_that_takes_them():
    import gzip

    import streamlit

    static = Path(streamlit.__file__).parent / "static" / "static"
    script = max((static / "js").glob("index.*.js"), key=lambda p: p.stat().st_size)
    style = next((static / "css").glob("*.css"))
    gz = [(b"accept-encoding", b"gzip, deflate, br")]
    for path, kind in ((script, "text/javascript"), (style, "text/css")):
        url, body = f"/static/{path.parent.name}/{path.name}", []
        status, headers = call(url, headers=gz, body=body)
        assert status == 200 and headers["content-encoding"] == "gzip" and headers["content-type"].startswith(kind)
        assert gzip.decompress(b"".join(body)) == path.read_bytes() and int(headers["content-length"]) == len(b"".join(body))
        assert "immutable" in headers["cache-control"] and headers["vary"] == "accept-encoding"
        assert headers["content-security-policy"] == content_security_policy()
        head = []
        assert call(url, headers=gz, method="HEAD", body=head)[0] == 200 and b"".join(head) == b""
    assert len(gzip.compress(script.read_bytes())) < script.stat().st_size / 2
    url = f"/static/js/{script.name}"
    # Streamlit answers: no gzip asked, a copy to check, a range, a file it does not ship, not a script
    for headers in ([], [*gz, (b"if-none-match", b'"x"')], [*gz, (b"range", b"bytes=0-9")]):
        body = []
        assert call(url, headers=headers, body=body)[0] == 200 and b"".join(body) == b"streamlit"
    for other in ("/static/js/nothing.js", "/static/js/../css/x.css", "/static/js/%2e%2e%2fx.js", "/static/media/x.woff2",
                  "/static/js/index.js.map", "/static/js/.hidden.js"):
        body = []
        call(other, headers=gz, body=body)
        assert b"".join(body) == b"streamlit", other
    assert call(url, headers=gz, method="POST", body=(body := []))[0] == 200 and b"".join(body) == b"streamlit"


PAGE = b"<!DOCTYPE html><html><head><title>Streamlit</title></head><body></body></html>"


def serve_page(path: str, page: bytes = PAGE, encoding: bytes | None = None, method: str = "GET",
               content_type: bytes = b"text/html; charset=utf-8", query: bytes = b"",
               headers: list | None = None) -> tuple[dict, bytes]:
    """What the middleware sends for `path` when Streamlit answers it with `page`."""
    async def app(scope, receive, send):
        headers = [(b"content-type", content_type), (b"content-length", str(len(page)).encode()),
                   (b"etag", b'"streamlit"'), *([(b"content-encoding", encoding)] if encoding else [])]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": page})

    sent = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": query,
             "client": ("127.0.0.1", 40000), "headers": headers or []}
    asyncio.run(GuideMiddleware(app)(scope, None, send))
    headers = {k.decode(): v for k, v in sent[0]["headers"]}
    return headers, b"".join(m.get("body", b"") for m in sent[1:])


def test_streamlit_s_page_says_where_the_server_is_first():
    import gzip

    from guide.chapters import ROOT

    script = (ROOT / "assets" / "backend_url.html").read_bytes()
    for path, depth in (("/", 0), ("", 0), ("/oom", 1), ("/no-such-page", 1)):
        headers, body = serve_page(path)
        expected = PAGE.replace(b"<head>", b'<head><meta name="guide-page-depth" content="%d">' % depth + script)
        if path != "/no-such-page":  # a chapter's page also gets its title (test_page_shell.py)
            assert b'class="guide-shell-title"' in body, path
            expected = expected.split(b"<title>")[0]
            body = body.split(b"<title>")[0]
        assert body == expected, path
        assert int(headers["content-length"]) == len(serve_page(path)[1]), path
        assert "etag" not in headers  # Streamlit's validator named its own page
    headers, body = serve_page("/oom", gzip.compress(PAGE), b"gzip")  # Streamlit gzips its page when asked
    assert headers["content-encoding"] == b"gzip" and int(headers["content-length"]) == len(body)
    assert gzip.decompress(body).startswith(b'<!DOCTYPE html><html><head><meta name="guide-page-depth" content="1">')
    # left as they are: another type, a page too large, a HEAD, Streamlit's own paths, files
    headers, body = serve_page("/oom", content_type=b"text/plain")
    assert body == PAGE and headers["etag"] == b'"streamlit"'
    big = b"<head>" + b"x" * (2 << 20)
    assert serve_page("/oom", big)[1] == big
    assert serve_page("/oom", method="HEAD")[1] == PAGE
    for path in ("/_stcore/health", "/static/index.html", "/favicon.png", "/app/static/x.html"):
        assert serve_page(path)[1] == PAGE, path
    bomb = gzip.compress(b"<head>" + b"\0" * (8 << 20))  # more than any page of Streamlit's once unpacked
    assert serve_page("/oom", bomb, b"gzip")[1] == bomb


def test_only_a_direct_local_request_reads_the_metrics():
    assert call("/_stcore/metrics")[0] == 200
    assert call("/_stcore/metrics", client="::ffff:127.0.0.1")[0] == 200
    assert call("/_stcore/metrics", client="::1")[0] == 200
    assert call("/_stcore/metrics", client="203.0.113.9")[0] == 404
    assert call("/_stcore/metrics", headers=[(b"x-forwarded-for", b"203.0.113.9")])[0] == 404
    assert call("/_stcore/metrics", headers=[(b"forwarded", b"for=203.0.113.9")])[0] == 404


def test_the_security_headers():
    headers = security_headers("'self'")
    policy = headers["Content-Security-Policy"]
    assert "script-src 'self' 'unsafe-inline' 'wasm-unsafe-eval'" in policy and "'unsafe-eval'" not in policy
    assert "frame-ancestors 'self'" in policy and "object-src 'none'" in policy
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "SAMEORIGIN"
    space = security_headers("https://huggingface.co")
    assert "frame-ancestors https://huggingface.co" in space["Content-Security-Policy"]
    assert "X-Frame-Options" not in space  # it cannot name another origin


def test_the_deployment_doc_gives_the_proxy_the_same_policy():
    from tests.conftest import ROOT

    assert content_security_policy() in (ROOT / "docs" / "deploy.md").read_text()


def call_raw(raw: str, client: str = "203.0.113.9", headers: list | None = None) -> int:
    """As an ASGI server passes a request: `path` decoded (what the router matches), `raw_path`
    as sent."""
    from urllib.parse import unquote

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"metrics"})

    sent = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": unquote(raw), "raw_path": raw.encode(), "query_string": b"",
             "client": (client, 40000), "headers": headers or []}
    asyncio.run(GuideMiddleware(app)(scope, None, send))
    return sent[0]["status"]


ENCODED_METRICS = ["/_stcore/%6Detrics", "/_stcore/metric%73", "/_stcore/%6d%65%74%72%69%63%73", "/%5Fstcore/metrics",
                   "/_stcore%2Fmetrics", "/_stcore/metrics/", "//_stcore//metrics", "/_stcore/Metrics",
                   "/_stcore/%256Detrics", "/_stcore/metrics?x=1"]


@pytest.mark.parametrize("raw", ENCODED_METRICS)
@pytest.mark.parametrize("client,headers", [("203.0.113.9", []), ("127.0.0.1", [(b"x-forwarded-for", b"203.0.113.9")]),
                                            ("127.0.0.1", [(b"X-Real-IP", b"203.0.113.9")])])
def test_the_metrics_stay_private_whatever_the_paths_encoding(raw, client, headers):
    assert call_raw(raw, client, headers) == 404


def test_encoded_metrics_paths_still_answer_this_machine():
    assert call_raw("/_stcore/%6Detrics", client="127.0.0.1") == 200
