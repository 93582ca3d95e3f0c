"""A small HTTP server that answers the requests huggingface_hub makes, like the real Hub.

Repositories are plain dicts of file name -> bytes. It speaks the parts of the protocol the
client relies on: X-Repo-Commit and ETag headers, X-Error-Code on 401/403/404, Range reads
(with the bytes sent per file recorded, so tests can show that only headers were read), and
the model-info API. Nothing of the client is mocked.

It can also play a hostile Hub, file by file (`hostile`): an answer that trickles one byte at
a time, a GET that stalls after its headers, a file far larger than it should be (generated
as it is sent, with the bytes actually sent recorded), a redirect elsewhere.
"""

from __future__ import annotations

import hashlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import json
import re
import threading
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_API = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)(?:/revision/(?P<rev>[^/]+))?$")


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.gated: set[str] = set()
        self.requests: list[str] = []
        self.authorizations: list[str | None] = []  # each request's Authorization header, in order
        self.user_agents: list[str | None] = []
        self.sent_bytes: dict[str, int] = {}  # file path -> body bytes sent (proves Range reads)
        # "repo/file" -> how to misbehave: {"trickle": seconds between bytes}, {"stall": seconds},
        # {"huge": bytes, "fill": pattern}, {"redirect": url}, {"status": 500} (an error, no X-Error-Code),
        # {"head_trickle": seconds between the status line's and headers' bytes},
        # {"chunk_trickle": seconds between chunk extensions of a chunked body that never ends}
        self.hostile: dict[str, dict] = {}
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, repo: str, files: dict[str, bytes | str | dict]) -> None:
        self.repos[repo] = {
            name: (json.dumps(body).encode() if isinstance(body, dict) else
                   body.encode() if isinstance(body, str) else body)
            for name, body in files.items()
        }

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_HEAD(self):
                self._serve(send_body=False)

            def do_GET(self):
                self._serve(send_body=True)

            def _error(self, status: int, code: str) -> None:
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _serve(self, send_body: bool) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append(f"{self.command} {path}")
                hub.authorizations.append(self.headers.get("Authorization"))
                hub.user_agents.append(self.headers.get("User-Agent"))
                api = _API.match(path)
                if api:
                    return self._model_info(api["repo"], send_body)
                match = _RESOLVE.match(path)
                if not match:
                    return self._error(404, "RepoNotFound")
                repo, filename = match["repo"], match["file"]
                if f"{repo}/{filename}" in hub.hostile:
                    return self._hostile(hub.hostile[f"{repo}/{filename}"], path, send_body)
                if repo not in hub.repos:
                    return self._error(401, "RepoNotFound")
                if repo in hub.gated:
                    return self._error(403, "GatedRepo")
                body = hub.repos[repo].get(filename)
                if body is None:
                    return self._error(404, "EntryNotFound")
                status, chunk = 200, body
                ranged = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
                if ranged and send_body:
                    start = int(ranged[1])
                    end = int(ranged[2]) if ranged[2] else len(body) - 1
                    status, chunk = 206, body[start:end + 1]
                self.send_response(status)
                self.send_header("ETag", '"' + hashlib.sha256(body).hexdigest() + '"')
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("Content-Length", str(len(chunk)))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                if send_body:
                    hub.sent_bytes[path] = hub.sent_bytes.get(path, 0) + len(chunk)
                    self.wfile.write(chunk)

            def _trickle(self, data: bytes, seconds: float) -> bool:
                """Send `data` a byte at a time; False once the hub stops or the reader left."""
                for byte in data:
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        return False
                    if hub._stopping.wait(seconds):
                        return False
                return True

            def _hostile(self, how: dict, path: str, send_body: bool) -> None:
                if "head_trickle" in how:  # headers that never end, each byte in time for a read timeout
                    self._trickle(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 100_000, how["head_trickle"])
                    self.close_connection = True
                    return
                if "chunk_trickle" in how:  # a chunked body of chunk extensions only: no byte of data
                    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Repo-Commit: " + COMMIT.encode() + b"\r\n\r\n"
                    self.wfile.write(head)
                    self.wfile.flush()
                    self._trickle(b"1;" + b"x" * 100_000, how["chunk_trickle"])
                    self.close_connection = True
                    return
                if "status" in how:
                    self.send_response(how["status"])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if "redirect" in how:
                    self.send_response(302)
                    self.send_header("Location", how["redirect"])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                size = how.get("huge", 1_000_000)
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", '"hostile"')
                self.send_header("Content-Length", str(size))
                self.end_headers()
                if not send_body:
                    return
                try:
                    if "stall" in how:
                        self.wfile.flush()
                        hub._stopping.wait(how["stall"])
                    elif "trickle" in how:
                        for _ in range(size):
                            self.wfile.write(b"{")
                            self.wfile.flush()
                            hub.sent_bytes[path] = hub.sent_bytes.get(path, 0) + 1
                            if hub._stopping.wait(how["trickle"]):
                                return
                    else:
                        fill = how.get("fill", b"[{},")
                        chunk = fill * (65536 // len(fill))
                        sent = 0
                        while sent < size and not hub._stopping.is_set():
                            part = chunk[: size - sent]
                            self.wfile.write(part)
                            sent += len(part)
                            hub.sent_bytes[path] = sent
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _model_info(self, repo: str, send_body: bool) -> None:
                if repo not in hub.repos:
                    return self._error(401, "RepoNotFound")
                if repo in hub.gated:
                    return self._error(403, "GatedRepo")
                info = {"id": repo, "modelId": repo, "sha": COMMIT, "private": False,
                        "siblings": [{"rfilename": name} for name in hub.repos[repo]]}
                body = json.dumps(info).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body:
                    self.wfile.write(body)

        return Handler
