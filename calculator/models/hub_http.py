"""The HTTP client of every Hub read: one wall-clock deadline over the whole answer.

httpx's timeouts bound each socket operation, never an answer: a server that sends its headers
one byte a second, or a chunked body made of chunk extensions only, answers every read in time
and holds the reader for as long as it likes (about three minutes in a hostile probe). So every
socket operation of a Hub read, the connection, the headers, the chunk framing and the body
alike, runs through the client's `DeadlineBackend`, which gives it at most what is left of the question's
deadline and refuses it once the deadline has passed (`within`).

The client is our own, not huggingface_hub's shared session: that one's headers come from
`build_hf_headers`, whose telemetry fetches `{HF_ENDPOINT}/api/agent-harnesses` on the first
request, writes `HF_HOME/.agent_harnesses.json` and reports matching environment variables in
its User-Agent. Ours sends a fixed User-Agent and the token, and only to the endpoint's own
origin (hub.py). Proxies from the environment are honoured as huggingface_hub's client does.
"""

from __future__ import annotations

import contextlib
import threading
import time

USER_AGENT = "model-memory-guide (+offline-first memory calculator)"
_LOCK = threading.Lock()
_CLIENT = None
_END = threading.local()  # the monotonic time the current thread's Hub question must end by


@contextlib.contextmanager
def within(end: float):
    """Every socket operation of this thread's Hub reads ends by `end` (time.monotonic())."""
    previous = getattr(_END, "value", None)
    _END.value = end if previous is None else min(end, previous)
    try:
        yield
    finally:
        _END.value = previous


def _bounded(timeout: float | None, timeout_error: type[Exception]) -> float | None:
    end = getattr(_END, "value", None)
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise timeout_error("the Hub question's deadline has passed")
    return left if timeout is None else min(timeout, left)


def _backend_classes():
    import httpcore2

    class DeadlineStream(httpcore2.NetworkStream):
        def __init__(self, inner) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._inner.read(max_bytes, _bounded(timeout, httpcore2.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, _bounded(timeout, httpcore2.WriteTimeout))

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname,
                                                        _bounded(timeout, httpcore2.ConnectTimeout)))

        def get_extra_info(self, info: str):
            return self._inner.get_extra_info(info)

    class DeadlineBackend(httpcore2.NetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore2.SyncBackend()

        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            return DeadlineStream(self._inner.connect_tcp(host, port, _bounded(timeout, httpcore2.ConnectTimeout),
                                                          local_address, socket_options))

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            return DeadlineStream(self._inner.connect_unix_socket(path, _bounded(timeout, httpcore2.ConnectTimeout),
                                                                  socket_options))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    return DeadlineBackend


def _pools(client):
    """The connection pools of a client: its own transport's and each proxy mount's (httpx2
    2.17 keeps the pool as `_pool`; tests/test_hostile_hub.py fails if that changes)."""
    transports = [client._transport, *client._mounts.values()]  # noqa: SLF001 - no public hook for the backend
    return [t._pool for t in transports if t is not None and hasattr(t, "_pool")]  # noqa: SLF001


def client():
    """The one client of every Hub read (built on first use, shared by threads)."""
    global _CLIENT
    if _CLIENT is None:
        with _LOCK:
            if _CLIENT is None:
                import httpx2

                built = httpx2.Client(follow_redirects=False, timeout=None)  # headers(): per request
                backend = _backend_classes()()
                pools = _pools(built)
                if not pools:
                    raise RuntimeError("httpx2 keeps its connection pool elsewhere: the Hub deadline cannot hold")
                for pool in pools:
                    pool._network_backend = backend  # noqa: SLF001
                _CLIENT = built
    return _CLIENT


def headers(token: str | None) -> dict[str, str]:
    """What every Hub request sends: our User-Agent, and the token when there is one."""
    sent = {"user-agent": USER_AGENT}
    if token:
        sent["authorization"] = f"Bearer {token}"
    return sent
