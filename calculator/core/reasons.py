"""Why something failed, in words of our own in each language.

A refusal often carries a cause that a library or the system wrote in English: json's
"Expecting ',' delimiter", the OS's "Permission denied", httpx's ConnectError. A French reader
must read the whole message in French, so the causes people meet are mapped here to sentences
of the UI catalogs (content/ui/<lang>/reasons.toml, keys "reason.<key>"), the position, status
or exit code kept as data. A cause nobody mapped keeps the library's words, labelled in each
language as the library's own, in English (`library`).

A Reason is a parameter of a CalculatorError: it has `shown(lang)`, as Grouped does, so the
message in each language fills it in its own words. It pickles (build workers send errors back).
"""

from __future__ import annotations

from dataclasses import dataclass
import errno
import re
import signal
import unicodedata

MAX_DETAIL_CHARS = 240  # a library's words kept as evidence: enough to recognise, never a dump


@dataclass(frozen=True)
class Reason:
    key: str
    params: tuple[tuple[str, object], ...] = ()  # strings, or counts that group their digits

    def shown(self, lang: str) -> str:
        from calculator.core.messages import text

        return text(f"reason.{self.key}", lang,
                    **{name: value.shown(lang) if hasattr(value, "shown") else value for name, value in self.params})

    def __str__(self) -> str:
        return self.shown("en")


def reason(key: str, /, **params: object) -> Reason:
    """The cause `key`, its values cut and made printable as a CalculatorError's are."""
    from calculator.core.errors import printable

    return Reason(key, tuple((name, value if hasattr(value, "shown") else printable(str(value)))
                             for name, value in params.items()))


def library(source: str, detail: object) -> Reason:
    """A cause nobody mapped: the words of `source` (json, system, httpx, worker), said in
    each language to be theirs and in English."""
    words = " ".join(str(detail).split())[:MAX_DETAIL_CHARS] or "?"
    return reason(f"library_{source}", detail=words)


def shown_path(path: object, limit: int = 200) -> str:
    """A path as a message shows it: control characters made visible, cut past `limit`."""
    text = "".join(repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") else c for c in str(path)[: limit + 1])
    return text if len(text) <= limit else text[:limit] + "…"


# json's messages (Lib/json/decoder.py and the C scanner), by their fixed start.
_JSON = (
    ("Expecting value", "json_value_missing"),
    ("Expecting property name enclosed in double quotes", "json_key_not_quoted"),
    ("Expecting ',' delimiter", "json_comma_missing"),
    ("Expecting ':' delimiter", "json_colon_missing"),
    ("Unterminated string", "json_string_not_closed"),
    ("Extra data", "json_extra_data"),
    ("Invalid control character", "json_control_character"),
    ("Invalid \\escape", "json_bad_escape"),
    ("Invalid \\uXXXX escape", "json_bad_escape"),
    ("Illegal trailing comma", "json_trailing_comma"),
)


# Python's cap on the digits of one integer (sys.get_int_max_str_digits), which json meets first.
_DIGITS = re.compile(r"Exceeds the limit \((\d{1,9}) digits\) for integer string conversion: value has (\d{1,12}) digits")


def json_reason(exc: ValueError) -> Reason:
    message = getattr(exc, "msg", str(exc))
    digits = _DIGITS.match(message)
    if digits:
        from calculator.core.errors import Grouped

        return reason("json_number_too_long", limit=Grouped(int(digits[1])), digits=Grouped(int(digits[2])))
    for start, key in _JSON:
        if message.startswith(start):
            return reason(key)
    return library("json", message)


def json_kind(value: object) -> Reason:
    """What a JSON document holds instead of an object, as JSON names it."""
    kind = ("null" if value is None else "bool" if isinstance(value, bool) else "list" if isinstance(value, list)
            else "str" if isinstance(value, str) else "number")
    return reason(f"json_kind_{kind}")


_OS = {errno.EACCES: "os_permission", errno.EPERM: "os_permission", errno.EISDIR: "os_is_directory",
       errno.ENOENT: "os_not_found", errno.ENAMETOOLONG: "os_name_too_long", errno.ELOOP: "os_link_loop",
       errno.EIO: "os_io_error", errno.ENOTDIR: "os_not_directory"}


def os_reason(exc: BaseException) -> Reason:
    """An OSError's cause; a ValueError (a NUL byte in a path) is a path that cannot exist."""
    if isinstance(exc, ValueError):
        return reason("os_bad_path")
    key = _OS.get(getattr(exc, "errno", None))
    return reason(key) if key else library("system", getattr(exc, "strerror", None) or exc)


def _chain(exc: BaseException | None):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def connection_reason(exc: BaseException) -> Reason:
    """Why a request to a server got no answer: the OS's cause somewhere in the exception's
    chain (httpx wraps it), else the kind of failure httpx names."""
    import socket

    for link in _chain(exc):
        if isinstance(link, socket.gaierror):
            return reason("net_name_unresolved")
        code = getattr(link, "errno", None)
        if code == errno.ECONNREFUSED:
            return reason("net_refused")
        if code in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return reason("net_unreachable")
        if code == errno.ECONNRESET:
            return reason("net_reset")
    name = type(exc).__name__
    if name in ("ConnectError", "ConnectTimeout"):
        return reason("net_connect_failed")
    if name in ("ReadError", "RemoteProtocolError", "WriteError", "LocalProtocolError"):
        return reason("net_broken_answer")
    if "SSL" in name or any("SSL" in type(link).__name__ for link in _chain(exc)):
        return reason("net_tls")
    return library("httpx", f"{name}: {exc}" if str(exc) else name)


def http_reason(status: int) -> Reason:
    if status == 429:
        return reason("http_rate_limited", status=status)
    if status >= 500:
        return reason("http_server_error", status=status)
    return reason("http_status", status=status)


def exit_reason(returncode: int | None) -> Reason:
    """How a child process ended: a signal (negative code) by its name, else its exit code."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return reason("process_killed", signal=name)
    return reason("process_exited", code=returncode if returncode is not None else "?")
