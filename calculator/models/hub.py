"""The Hugging Face Hub: read a file of a model repository within bounds.

Whatever a Hub (or something answering as one) sends is read as a stream and bounded while it
comes: never more than the file's cap in memory (nothing is written to disk), one overall
deadline per question that bounds every socket operation, headers and chunk framing included
(hub_http.py), redirects followed only to the Hub's own hosts, and HF_TOKEN sent only to the
endpoint's exact origin (scheme, host and port). The client is our own (hub_http.py), not
huggingface_hub's download function, which writes the whole file into the Hub cache before
anyone can look at its size and retries a stalled answer for a minute, nor its session, whose
telemetry writes into HF_HOME. HF_ENDPOINT is read at call time, so tests can point it at a
local server playing the Hub; HF_HUB_OFFLINE=1 makes no request at all.
"""

from __future__ import annotations

from dataclasses import dataclass
import os
import re
import time
from urllib.parse import urljoin, urlsplit

from calculator.models import hub_http
from calculator.models.configs import MAX_CONFIG_BYTES, parse_config_text
from calculator.core.errors import CalculatorError
from calculator.core.reasons import connection_reason, http_reason, reason

# An org/name id, or a legacy single-name id. Same characters as the Hub allows; no "..".
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
HUB_ID = re.compile(rf"^(?:{_PART}/)?{_PART}$")
OFFICIAL_ENDPOINT = "https://huggingface.co"
# One question to the Hub (a config; a checkpoint's index and headers) gets DEADLINE_SECONDS,
# every socket operation included (hub_http.py), and one operation waits at most STALL_SECONDS;
# limit_seconds(), the figure messages say, keeps STALL_SECONDS as the margin of the work done
# between reads (parsing, the build worker's start).
DEADLINE_SECONDS = 12.0
STALL_SECONDS = 4.0
MAX_REDIRECTS = 5
MAX_ERROR_BODY = 64 * 1024
# The official Hub serves large files from its own CDNs (cdn-lfs.hf.co, cas-bridge.xethub.hf.co).
OFFICIAL_DOMAINS = ("huggingface.co", "hf.co")


def is_hub_id(name: str) -> bool:
    return isinstance(name, str) and bool(HUB_ID.match(name)) and ".." not in name and "--" not in name


def check_hub_id(name: str) -> str:
    """The id itself if it is a well-formed Hub id; a clear error before any request if not."""
    name = name.strip() if isinstance(name, str) else ""
    if not is_hub_id(name):
        raise CalculatorError("bad_hub_id", name=_printable(name))
    return name


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or OFFICIAL_ENDPOINT).rstrip("/")


def limit_seconds() -> int:
    """The longest a question to the Hub can take, as messages state it."""
    return int(DEADLINE_SECONDS + STALL_SECONDS)


def offline() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return flag.strip().lower() in ("1", "on", "yes", "true")


class Deadline:
    """The time one question to the Hub has left, shared by all its requests."""

    def __init__(self, seconds: float | None = None) -> None:
        self.end = time.monotonic() + (DEADLINE_SECONDS if seconds is None else seconds)

    @classmethod
    def until(cls, end: float) -> Deadline:
        """The deadline that ends at `end` (time.monotonic(), which every process of one machine
        reads from the same clock): a build worker keeps its caller's deadline, its own start
        included, instead of starting a new one."""
        deadline = cls(0)
        deadline.end = end
        return deadline

    def left(self) -> float:
        return self.end - time.monotonic()


@dataclass(frozen=True)
class HubFile:
    """Where to read one file, and what to say when it is not there or too large."""

    repo: str
    filename: str
    cap: int  # bytes: one more and the read stops with `too_large`
    missing: str = "hub_no_config"  # the error code for a repository without this file
    too_large: tuple[str, dict] = ("config_too_large", {})
    endpoint: str = ""
    token: str | None = None

    def url(self) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo, self.filename, endpoint=self.endpoint or endpoint())


def read_file(file: HubFile, deadline: Deadline, first: int = 0, last: int | None = None) -> bytes:
    """The file's bytes (or bytes first..last, even from a server that ignores Range), read
    as a stream within `file.cap` bytes and the deadline; the Hub's answers as our errors."""
    if offline():
        raise CalculatorError("hub_unreachable", repo=file.repo, detail=reason("offline_mode"))
    import httpx2

    token = file.token if file.token is not None else (os.environ.get("HF_TOKEN") or None)
    headers = hub_http.headers(token)
    if last is not None:
        headers["range"] = f"bytes={first}-{last}"
    try:
        with hub_http.within(deadline.end):
            return _follow(hub_http.client(), file, file.url(), headers, deadline, first,
                           None if last is None else last - first + 1)
    except CalculatorError:
        raise
    except httpx2.TimeoutException:
        raise CalculatorError("hub_too_slow", repo=file.repo, seconds=limit_seconds()) from None
    except Exception as exc:  # offline, DNS, refused connections, broken answers
        raise CalculatorError("hub_unreachable", repo=file.repo, detail=connection_reason(exc)) from None


def _follow(session, file: HubFile, url: str, headers: dict, deadline: Deadline, first: int,
            wanted: int | None) -> bytes:
    """GET url, following at most MAX_REDIRECTS redirects, each to an allowed host."""
    allowed = allowed_hosts(url)
    for _ in range(MAX_REDIRECTS + 1):
        left = deadline.left()
        if left <= 0:
            raise CalculatorError("hub_too_slow", repo=file.repo, seconds=limit_seconds())
        timeout = min(left, STALL_SECONDS)
        with session.stream("GET", url, headers=headers, timeout=timeout, follow_redirects=False) as response:
            if response.status_code in (301, 302, 303, 307, 308):
                url = urljoin(url, response.headers.get("location", ""))
                if not redirect_allowed(url, allowed):
                    raise CalculatorError("hub_redirect", repo=file.repo, host=_printable(urlsplit(url).hostname or "?"))
                if origin(url) != origin(file.url()):  # the token goes to the endpoint's origin only
                    headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
                continue
            if response.status_code >= 400:
                raise _status_error(response.status_code, response.headers, file)
            skip = first if response.status_code == 200 else 0  # the whole file: skip to ours
            return _capped_body(response, file, deadline, skip, wanted)
    raise CalculatorError("hub_redirect", repo=file.repo, host=_printable(urlsplit(url).hostname or "?"))


def origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin as browsers compare them: scheme, host and port (the scheme's default
    port when none is written)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: no origin anything shares
        return (parts.scheme, "\0", -1)
    default = {"https": 443, "http": 80}.get(parts.scheme)
    return (parts.scheme.lower(), (parts.hostname or "").lower(), port if port is not None else default)


def allowed_hosts(url: str) -> tuple[str, ...]:
    """The hosts a request to `url` may be sent on to: the endpoint's own, and for the
    official Hub its CDNs (subdomains of its domains)."""
    host = (urlsplit(url).hostname or "").lower()
    if host in OFFICIAL_DOMAINS:
        return OFFICIAL_DOMAINS
    return (host,)


def redirect_allowed(url: str, allowed: tuple[str, ...]) -> bool:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("https", "http") or not host:
        return False
    if host in allowed:
        return True
    official = allowed == OFFICIAL_DOMAINS
    return official and parts.scheme == "https" and any(host.endswith("." + domain) for domain in allowed)


def _capped_body(response, file: HubFile, deadline: Deadline, skip: int, wanted: int | None) -> bytes:
    """The body, `skip` bytes dropped: a range's `wanted` bytes (more are never read), or the
    whole file up to its cap (one byte past the cap says "too large" without reading more)."""
    ranged = wanted is not None
    wanted = min(wanted, file.cap) if ranged else file.cap + 1
    body = bytearray()
    for chunk in response.iter_bytes():
        if skip:
            cut = min(skip, len(chunk))
            chunk, skip = chunk[cut:], skip - cut
        body += chunk[: wanted - len(body)]
        if len(body) >= wanted and ranged:
            break
        if len(body) >= wanted:
            code, params = file.too_large
            raise CalculatorError(code, **{"name": f"{file.repo}/{file.filename}",
                                           "limit_mib": file.cap // 2**20, **params})
        if deadline.left() <= 0:
            raise CalculatorError("hub_too_slow", repo=file.repo, seconds=limit_seconds())
    return bytes(body)


def _status_error(status: int, headers, file: HubFile) -> CalculatorError:
    """The Hub's answer as one of our errors, as huggingface_hub reads its X-Error-Code."""
    code = headers.get("x-error-code", "")
    if code == "GatedRepo":
        return CalculatorError("hub_gated", repo=file.repo)
    if code in ("RepoNotFound", "RevisionNotFound") or status == 401:
        return CalculatorError("hub_not_found", repo=file.repo)
    if code == "EntryNotFound" or status == 404:
        return CalculatorError(file.missing, repo=file.repo)
    if status == 403:
        return CalculatorError("hub_forbidden", repo=file.repo)
    return CalculatorError("hub_unreachable", repo=file.repo, detail=http_reason(status))


def fetch_config(repo_id: str, deadline: Deadline | None = None) -> dict:
    """config.json of a Hub repository, as a checked dict. An unreachable or too slow Hub:
    the copy another tool left in the Hub cache when there is one, else a clear error."""
    repo_id = check_hub_id(repo_id)
    name = f"{repo_id}/config.json"
    try:
        raw = read_file(HubFile(repo_id, "config.json", MAX_CONFIG_BYTES), deadline or Deadline())
    except CalculatorError as error:
        if error.code not in ("hub_unreachable", "hub_too_slow"):
            raise
        raw = _cached_config(repo_id)
        if raw is None:
            raise
    return parse_config_text(raw, name=name)


def _cached_config(repo_id: str) -> bytes | None:
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(repo_id, "config.json")
        if not isinstance(cached, str):
            return None
        with open(cached, "rb") as handle:
            return handle.read(MAX_CONFIG_BYTES + 1)
    except (OSError, ValueError):
        return None


def _printable(name: str) -> str:
    shown = "".join(ch if ch.isprintable() else "?" for ch in name[:61])  # never walk a 10 MB name
    return shown if len(shown) <= 60 else shown[:57] + "..."
