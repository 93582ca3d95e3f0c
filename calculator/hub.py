"""The Hugging Face Hub: fetch a model's config.json (and nothing else to build it).

Uses the official client with a token from HF_TOKEN, a short timeout and its disk cache.
HF_ENDPOINT is read at call time, so tests can point it at a local server playing the Hub.
"""

from __future__ import annotations

import os
import re

from .configs import MAX_CONFIG_BYTES, parse_config_text
from .errors import CalculatorError

# An org/name id, or a legacy single-name id. Same characters as the Hub allows; no "..".
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
HUB_ID = re.compile(rf"^(?:{_PART}/)?{_PART}$")
TIMEOUT_SECONDS = 10.0


def is_hub_id(name: str) -> bool:
    return isinstance(name, str) and bool(HUB_ID.match(name)) and ".." not in name and "--" not in name


def check_hub_id(name: str) -> str:
    """The id itself if it is a well-formed Hub id; a clear error before any request if not."""
    name = name.strip() if isinstance(name, str) else ""
    if not is_hub_id(name):
        raise CalculatorError("bad_hub_id", name=_printable(name))
    return name


def fetch_config(repo_id: str, timeout: float = TIMEOUT_SECONDS) -> dict:
    """config.json of a Hub repository, as a checked dict. Unreachable Hub: the cached copy
    when there is one, else a clear error at once (the client's own retries take ~25 s)."""
    repo_id = check_hub_id(repo_id)
    raw = _read_capped(_config_path(repo_id, timeout))
    return parse_config_text(raw, name=f"{repo_id}/config.json")


def _config_path(repo_id: str, timeout: float) -> str:
    import huggingface_hub as hub
    from huggingface_hub import errors as hub_errors

    endpoint = os.environ.get("HF_ENDPOINT") or None
    token = os.environ.get("HF_TOKEN") or None
    try:
        # One HEAD request without retries: tells "missing" from "gated" from "unreachable".
        hub.get_hf_file_metadata(hub.hf_hub_url(repo_id, "config.json", endpoint=endpoint),
                                 token=token, timeout=timeout)
        return hub.hf_hub_download(repo_id, "config.json", token=token, etag_timeout=timeout, endpoint=endpoint)
    except hub_errors.GatedRepoError:
        raise CalculatorError("hub_gated", repo=repo_id) from None
    except (hub_errors.RepositoryNotFoundError, hub_errors.RevisionNotFoundError):
        raise CalculatorError("hub_not_found", repo=repo_id) from None
    except hub_errors.LocalEntryNotFoundError as exc:
        error = exc
    except hub_errors.EntryNotFoundError:
        raise CalculatorError("hub_no_config", repo=repo_id) from None
    except Exception as exc:  # offline, DNS, timeouts, proxies, server errors
        error = exc
    cached = hub.try_to_load_from_cache(repo_id, "config.json")
    if isinstance(cached, str):
        return cached
    raise CalculatorError("hub_unreachable", repo=repo_id, detail=_short(error))


def _read_capped(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(MAX_CONFIG_BYTES + 1)


def _short(exc: Exception) -> str:
    return type(exc).__name__


def _printable(name: str) -> str:
    shown = "".join(ch if ch.isprintable() else "?" for ch in name)
    return shown if len(shown) <= 60 else shown[:57] + "..."
