"""What the guide's web server does before Streamlit answers (an ASGI middleware).

`streamlit run Home.py` finds the `st.App` that Home.py makes with this middleware and serves
it (Streamlit's own server, in its ASGI mode); each reader's page then runs Home.py as before.

- Unknown paths of more than one segment (`/estimator/extra`, `/a/b/c`): Streamlit would send
  its page there, whose asset URLs are relative (`./static/...`): they resolve under the
  unknown path, come back as that page again, and the reader sees a blank page. They are
  redirected to the one-segment path that names them (`/estimator%2Fextra`), where Streamlit
  serves the home page and the guide says "no such page" in the reader's language
  (guide/app.py).
- `/_stcore/metrics` answers only a direct request from this machine: not through a proxy
  (a forwarding header), not from another host, whatever the path's encoding
  (`/_stcore/%6Detrics` is the same route to Streamlit's router).
- `/_guide/plotly-<version>.min.js` is plotly.js as the installed plotly package ships it, for
  the guide's charts (guide/charts.py, assets/chart.js): a script from the guide itself, which
  the policy below already allows.
- Streamlit's own scripts and styles (`/static/js/*.js`, `/static/css/*.css`, names that carry
  their content's hash) go gzipped to a browser that takes it: Streamlit's server sends them as
  they are (about 4 MB of scripts for a chapter's first load, 1.2 MB gzipped). Each is
  compressed once, on its first request, and kept (the folder is fixed: 7 MB gzipped at
  most). A request that asks whether its copy is still good, or for a range, goes to Streamlit.
- Streamlit's page (its index.html, at the root and at every chapter's path) gets one small
  script first (assets/backend_url.html) that tells Streamlit's front end where the server is:
  on its own it asks `/<chapter>/_stcore/health` first, gets a 404, pauses and asks the root,
  about 130 ms of every chapter's first load. A chapter's page also gets its title, in the
  reader's language, painted with the HTML where Streamlit will draw it (guide/page_shell.py).
- Every answer carries the security headers of SECURITY_HEADERS (docs/deploy.md gives the
  same to a reverse proxy): a Content-Security-Policy that lets the guide's
  own scripts run and nothing from elsewhere, no framing but by the guide itself (or the
  origins of GUIDE_FRAME_ANCESTORS, such as https://huggingface.co for a Space), nosniff, and
  a referrer policy.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

from guide.page_shell import Shell, page_shell, with_shell

# Streamlit's own routes (first path segment): never redirected.
STREAMLIT_PREFIXES = frozenset({"_stcore", "static", "media", "component", "app", "auth", "oauth2callback"})
FORWARDING_HEADERS = (b"x-forwarded-for", b"forwarded", b"x-real-ip")


def _plotly_version() -> str:
    from importlib.metadata import version

    return version("plotly")


# plotly.js as the installed plotly package ships it, for the guide's charts (assets/chart.js);
# its version in the name, so a browser keeps it until plotly is upgraded.
PLOTLY_PATH = f"/_guide/plotly-{_plotly_version()}.min.js"


# Streamlit's own scripts and styles, as its page asks for them (./static/js/index.<hash>.js).
STATIC_TEXT = re.compile(r"/static/(js|css)/([A-Za-z0-9_-][A-Za-z0-9_.-]*\.(?:js|css))")
STATIC_TYPES = {"js": b"text/javascript; charset=utf-8", "css": b"text/css; charset=utf-8"}
ASKS_ABOUT_ITS_COPY = (b"if-none-match", b"if-modified-since", b"range")


def _streamlit_static() -> Path:
    import streamlit

    return Path(streamlit.__file__).parent / "static" / "static"


def content_security_policy(frame_ancestors: str = "'self'") -> str:
    """What Streamlit and the guide need, found by reading every chapter in a browser with
    the policy on (tests/test_browser_security.py fails on any violation): Streamlit's page
    starts with an inline script and the guide's scripts are inline (st.html), so
    'unsafe-inline' for scripts; Streamlit decodes its messages with WebAssembly, so
    'wasm-unsafe-eval' (not 'unsafe-eval': nothing calls eval); blob: scripts, because
    Streamlit loads a custom component's script (the case remembered in the browser,
    guide/remembered.py) as a blob URL the page itself makes (a script able to make one already
    runs, so this opens nothing 'unsafe-inline' does not); styles are set inline;
    images and fonts come from the guide itself or data:/blob: URLs, but for the tab's icon,
    a Material Symbol Streamlit fetches from fonts.gstatic.com; the websocket goes back to
    the same host ('self' covers ws: and wss: there); nothing else comes from elsewhere."""
    return "; ".join([
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline' 'wasm-unsafe-eval' blob:",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob: https://fonts.gstatic.com",  # the tab's icon (a Material Symbol)
        "font-src 'self' data:",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "frame-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        f"frame-ancestors {frame_ancestors}",
    ])


def security_headers(frame_ancestors: str | None = None) -> dict[str, str]:
    ancestors = (frame_ancestors if frame_ancestors is not None
                 else os.environ.get("GUIDE_FRAME_ANCESTORS", "").strip()) or "'self'"
    headers = {
        "Content-Security-Policy": content_security_policy(ancestors),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "strict-origin-when-cross-origin",
        "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
    }
    if ancestors == "'self'":
        headers["X-Frame-Options"] = "SAMEORIGIN"  # for browsers without frame-ancestors
    return headers


SECURITY_HEADERS = security_headers("'self'")


def _loopback(host: str) -> bool:
    """127.0.0.1, ::1, or 127.0.0.1 as a dual-stack socket reports it (::ffff:127.0.0.1)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost"
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def base_path() -> str:
    try:
        from streamlit import config

        base = (config.get_option("server.baseUrlPath") or "").strip("/")
    except Exception:
        base = ""
    return f"/{base}" if base else ""


def _path_forms(scope) -> set[str]:
    """The request's path as the router sees it (the server's decoded `path`) and as its raw
    bytes decode once and twice: `/_stcore/%6Detrics` and `/_stcore/metric%73` are the
    metrics route to the router, whatever the raw text says."""
    raw = (scope.get("raw_path") or b"").decode("latin-1").split("?", 1)[0]
    once = unquote(raw)
    return {scope.get("path", ""), raw, once, unquote(once)}


def is_metrics(scope, base: str = "") -> bool:
    """A request for Streamlit's metrics, in any spelling: any segment after `_stcore` that
    names metrics, in any case or encoding."""
    for path in _path_forms(scope):
        inner = path[len(base):] if base and path.startswith(base) else path
        segments = [s.lower() for s in inner.split("/") if s]
        if segments[:1] == ["_stcore"] and any("metric" in s for s in segments[1:]):
            return True
    return False


@lru_cache(maxsize=1)
def plotly_js() -> tuple[bytes, bytes]:
    """The installed plotly package's plotly.min.js, plain and gzipped (read once)."""
    import gzip
    from importlib.resources import files

    plain = files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    return plain, gzip.compress(plain, compresslevel=6, mtime=0)


@lru_cache(maxsize=1024)  # Streamlit 1.67 ships 317 scripts and styles: all of them fit
def static_gzipped(folder: str, name: str) -> bytes | None:
    """One of Streamlit's scripts or styles, gzipped (read and compressed once); None when
    Streamlit ships no such file."""
    import gzip

    root = _streamlit_static() / folder
    path = root / name
    if path.parent != root or not path.is_file():
        return None
    return gzip.compress(path.read_bytes(), compresslevel=6, mtime=0)


MAX_PAGE_BYTES = 1 << 20  # Streamlit's index.html is 5 KB; anything larger passes as it is


@lru_cache(maxsize=1)
def _backend_url_script() -> str:
    from guide.chapters import ROOT

    return (ROOT / "assets" / "backend_url.html").read_text(encoding="utf-8")


def with_backend_url(page: bytes, depth: int, gzipped: bool = False, shell: Shell | None = None) -> bytes:
    """Streamlit's page with assets/backend_url.html first in its head (depth: how many path
    segments the page sits below the server's root) and the chapter's title painted with it
    (guide/page_shell.py) when a chapter lives there, gzipped again if it came so."""
    import gzip
    import zlib

    if gzipped:
        unpacker = zlib.decompressobj(wbits=31)
        try:
            plain = unpacker.decompress(page, 4 * MAX_PAGE_BYTES)
        except zlib.error:
            return page
        if unpacker.unconsumed_tail:  # larger than any page of Streamlit's: left as it is
            return page
    else:
        plain = page
    marker = b"<head>"
    at = plain.find(marker)
    if at < 0:
        return page
    script = f'<meta name="guide-page-depth" content="{depth}">{_backend_url_script()}'.encode()
    at += len(marker)
    plain = plain[:at] + script + plain[at:]
    if shell is not None:
        plain = with_shell(plain, shell)
    return gzip.compress(plain, compresslevel=6, mtime=0) if gzipped else plain


def _header(scope, name: bytes) -> str:
    return next((value.decode("latin-1") for key, value in scope.get("headers", []) if key.lower() == name), "")


def accepts_gzip(scope) -> bool:
    return any(name.lower() == b"accept-encoding" and b"gzip" in value.lower() for name, value in scope.get("headers", []))


class GuideMiddleware:
    """The rules above, around Streamlit's ASGI app."""

    def __init__(self, app) -> None:
        self.app = app
        self.headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in security_headers().items()]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = scope.get("raw_path") or scope.get("path", "").encode("latin-1")
        path = raw.decode("latin-1").split("?", 1)[0]
        base = base_path()
        inner = path[len(base):] if base and path.startswith(base) else path
        segments = [s for s in inner.split("/") if s]
        if inner == PLOTLY_PATH and scope["method"] in ("GET", "HEAD"):
            await self._plotly(scope, send)
            return
        static = STATIC_TEXT.fullmatch(inner)
        if (static and scope["method"] in ("GET", "HEAD") and accepts_gzip(scope)
                and not any(name.lower() in ASKS_ABOUT_ITS_COPY for name, _ in scope.get("headers", []))):
            packed = await asyncio.to_thread(static_gzipped, static[1], static[2])
            if packed is not None:
                await self._gzipped(scope, send, packed, STATIC_TYPES[static[1]])
                return
        if is_metrics(scope, base) and not self._local(scope):
            await self._answer(send, 404, b"Not Found")
            return
        if (scope["method"] in ("GET", "HEAD") and len(segments) > 1
                and not any(s in STREAMLIT_PREFIXES or s.startswith("_stcore") for s in segments)):
            query = scope.get("query_string", b"").decode("latin-1")
            target = f"{base}/{'%2F'.join(segments)}" + (f"?{query}" if query else "")
            await self._answer(send, 302, b"", [(b"location", target.encode("latin-1"))])
            return

        async def with_headers(message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in self.headers if h[0] not in present)]
            await send(message)

        page = (scope["method"] == "GET" and len(segments) <= 1
                and not any(s in STREAMLIT_PREFIXES or s.startswith("_stcore") or "." in s for s in segments))
        if page:
            shell = page_shell(segments, scope.get("query_string", b"").decode("latin-1"), _header(scope, b"accept-language"))
            await self.app(scope, receive, self._page_sender(with_headers, len(segments), shell))
        else:
            await self.app(scope, receive, with_headers)

    @staticmethod
    def _page_sender(send, depth: int, shell: Shell | None = None):
        """A sender that puts assets/backend_url.html into Streamlit's page (an HTML answer, plain
        or gzipped, of a bounded size) and passes anything else as it comes. The page it changed
        loses Streamlit's validators (etag, last-modified): a browser asking whether its copy is
        still good would keep one made with another version of the script."""
        held: dict = {}

        async def sender(message) -> None:
            if message["type"] == "http.response.start":
                headers = dict((name.lower(), value) for name, value in message.get("headers", []))
                encoding = headers.get(b"content-encoding", b"").lower()
                if (headers.get(b"content-type", b"").startswith(b"text/html") and encoding in (b"", b"gzip")
                        and int(headers.get(b"content-length", b"0") or 0) <= MAX_PAGE_BYTES):
                    held.update(start=message, body=[], gzipped=encoding == b"gzip")  # Streamlit gzips its page
                    return
            elif message["type"] == "http.response.body" and "start" in held:
                held["body"].append(message.get("body", b""))
                if message.get("more_body", False) and sum(map(len, held["body"])) <= MAX_PAGE_BYTES:
                    return
                start, body, more = held.pop("start"), b"".join(held.pop("body")), message.get("more_body", False)
                if not more:  # the whole page: in with the script, and its new length
                    body = with_backend_url(body, depth, held.pop("gzipped"), shell)
                    start["headers"] = [(name, str(len(body)).encode() if name.lower() == b"content-length" else value)
                                        for name, value in start.get("headers", [])
                                        if name.lower() not in (b"etag", b"last-modified")]
                await send(start)
                await send({"type": "http.response.body", "body": body, "more_body": more})
                return
            await send(message)

        return sender

    @staticmethod
    def _local(scope) -> bool:
        forwarded = any(name.lower() in FORWARDING_HEADERS for name, _ in scope.get("headers", []))
        return _loopback((scope.get("client") or ("", 0))[0]) and not forwarded

    async def _plotly(self, scope, send) -> None:
        """plotly.js, gzipped when the browser takes it (4.8 MB, 1.4 MB gzipped), cached a year."""
        plain, packed = await asyncio.to_thread(plotly_js)  # the first request reads and gzips it
        if accepts_gzip(scope):
            await self._gzipped(scope, send, packed, STATIC_TYPES["js"])
        else:
            await self._kept_a_year(scope, send, plain, STATIC_TYPES["js"], [])

    async def _gzipped(self, scope, send, body: bytes, content_type: bytes) -> None:
        await self._kept_a_year(scope, send, body, content_type, [(b"content-encoding", b"gzip")])

    async def _kept_a_year(self, scope, send, body: bytes, content_type: bytes, extra: list) -> None:
        """A file whose name changes with its content: the browser keeps it a year."""
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
                   (b"cache-control", b"public, max-age=31536000, immutable"), (b"vary", b"accept-encoding"),
                   *extra, *self.headers]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})

    async def _answer(self, send, status: int, body: bytes, extra: list | None = None) -> None:
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                   (b"cache-control", b"no-cache"), *self.headers, *(extra or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
