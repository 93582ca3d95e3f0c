"""A paste-ready answer and how it is written: the `Answer` one builder per command makes
(calculator/answers/markdown.py for the memory commands, offload_multi.py and parallel_json.py for
the offloading, time and parallelism ones), the Markdown it becomes in the reader's language,
its section link, and the small pieces every builder shares (the card's name, the case the link
carries, the card assumption). Text lives in content/ui/<lang>/answer.toml; French answers get
the pages' typography (calculator/core/typography.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
import os
import shlex
from urllib.parse import urlencode

from calculator.core.messages import text
from calculator.core.units import format_bytes, format_count, format_number

DEFAULT_GUIDE_URL = "http://localhost:8501"


@dataclass(frozen=True)
class Answer:
    command: str  # the CLI command
    argv: tuple[str, ...]  # its arguments, without --json / --markdown
    verdict: tuple[str, dict]  # (message code, figures)
    assumptions: tuple[tuple[str, dict], ...] = ()
    advice: tuple[tuple[str, dict], ...] = ()
    code: tuple[str, str] | None = None  # (language, the command line or snippet to paste)
    link: tuple[str, str, tuple[tuple[str, str], ...]] = ("", "", ())  # slug, anchor, case values
    figures: dict = field(default_factory=dict)  # every figure the answer shows, for tests and tools


def _duration(seconds: float, lang: str) -> str:
    """A duration as the pages write it: seconds, then minutes, then hours."""
    if seconds < 120:
        return text("common.seconds", lang, n=format_number(seconds, 1, lang))
    if seconds < 7200:
        return text("common.minutes", lang, n=format_number(seconds / 60, 1, lang))
    return text("common.hours", lang, n=format_number(seconds / 3600, 1, lang))


def _shown(key: str, value: object, lang: str) -> str:
    if key.endswith("_duration"):
        return _duration(value, lang)
    if isinstance(value, list) and key.endswith("_rates"):  # (precision, per second): tokens whole, items to 0.1
        digits = 0 if key == "token_rates" else 1
        return ", ".join(f"{name} {format_number(rate, digits, lang)}" for name, rate in value)
    if isinstance(value, list) and key.endswith("_ms"):  # (link, milliseconds) pairs
        return ", ".join(f"{name} {format_number(ms, 2, lang)} ms" for name, ms in value)
    if isinstance(value, list):  # (name, bytes) pairs: "bfloat16 14.96 GiB, bnb-int8 8.46 GiB"
        return ", ".join(f"{name} {format_bytes(size, lang)}" for name, size in value)
    if isinstance(value, bool) or value is None:
        return str(value)
    if key.endswith("_bytes"):
        return format_bytes(value, lang)
    if isinstance(value, float):
        return format_number(value, 2 if value < 100 else 0, lang)
    if isinstance(value, int):
        return format_count(value, lang)
    return str(value)


def _say(code: str, params: dict, lang: str) -> str:
    return text(f"answer.{code}", lang, **{k: _shown(k, v, lang) for k, v in params.items()})


def card_name(key: str | None) -> str:
    from calculator.core.gpus import gpus

    return gpus()[key].name if key in gpus() else str(key)


def section_link(slug: str, anchor: str, case: tuple[tuple[str, str], ...], lang: str, base: str | None = None) -> str:
    """A section's address with the case values written out; `base`: the guide's (GUIDE_URL by
    default)."""
    base = (base or os.environ.get("GUIDE_URL", DEFAULT_GUIDE_URL)).rstrip("/")
    return f"{base}/{slug}?{urlencode([('lang', lang), *case])}#{anchor}"


def link_url(answer: Answer, lang: str, base: str | None = None) -> str:
    """The answer's section with every case value."""
    slug, anchor, case = answer.link
    return section_link(slug, anchor, case, lang, base)


def markdown(answer: Answer, lang: str = "en", base: str | None = None) -> str:
    """The answer as Markdown in `lang`, with French typography in French (code is left alone)."""
    parts = [_say(*answer.verdict, lang), "", f"**{text('answer.assumptions', lang)}**"]
    parts += [f"- {_say(code, params, lang)}" for code, params in answer.assumptions]
    if answer.advice or answer.code:
        parts += ["", f"**{text('answer.what_to_do', lang)}**"]
        parts += [f"- {_say(code, params, lang)}" for code, params in answer.advice]
    if answer.code:
        parts += ["", f"```{answer.code[0]}", answer.code[1], "```"]
    command = " ".join(["python", "-m", "calculator", answer.command, *map(shlex.quote, answer.argv)])
    parts += ["", f"{text('answer.more', lang)} {link_url(answer, lang, base)}", "", text("answer.reproduce", lang), "",
              "```bash", command, "```"]
    body = "\n".join(parts) + "\n"
    if lang == "fr":  # the pages' typography; code blocks and the bare URL are left as they are
        from calculator.core.typography import french

        body = french(body)
    return body


def case_pairs(data: dict, **values: object) -> tuple[tuple[str, str], ...]:
    pairs = {"model": data.get("model"), "gpu": data.get("gpu"), **values}
    return tuple((k, str(v)) for k, v in pairs.items() if v is not None)


def card_assumption(data: dict) -> tuple[str, dict]:
    return "card", {"gpu": card_name(data["gpu"]), "usable_bytes": data["usable_bytes"],
                    "headroom_bytes": data.get("headroom_bytes", 0)}
