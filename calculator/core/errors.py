"""Errors the calculator reports to people: a code, its parameters, a message per language."""

from __future__ import annotations

import unicodedata


class Grouped(int):
    """A count a message shows with its digits grouped as the reader's language writes them:
    1,048,576 in English, 1 048 576 in French (narrow no-break spaces)."""

    def shown(self, lang: str) -> str:
        grouped = f"{int(self):,}"
        return grouped.replace(",", "\u202f") if lang == "fr" else grouped


_BREAKS = "\n\r\t\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines() breaks at, and tabs
MAX_PARAM_CHARS = 2000  # what a message echoes of one value: a 10 MB argument is not printed back


def printable(value: str) -> str:
    """A value as one line of a message: line breaks and tabs as spaces, other control
    characters (a terminal's escape sequences) and undecodable bytes (lone surrogates) made visible, cut past MAX_PARAM_CHARS."""
    cut = value[: MAX_PARAM_CHARS + 1]
    text = "".join(" " if c in _BREAKS else repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Cs") else c for c in cut)
    return text if len(cut) <= MAX_PARAM_CHARS else text[:MAX_PARAM_CHARS] + "…"


class CalculatorError(Exception):
    """Bad input or an unreachable source. `code` names the message in the UI catalogs
    (key "error.<code>"), so the CLI and the guide say the same thing in each language."""

    def __init__(self, code: str, **params: object) -> None:
        self.code = code
        self.params = {key: value if hasattr(value, "shown") else printable(str(value)) for key, value in params.items()}
        super().__init__(self.message("en"))

    def shown_params(self, lang: str = "en") -> dict[str, str]:
        """The parameters as the message in `lang` writes them."""
        return {key: value.shown(lang) if hasattr(value, "shown") else value for key, value in self.params.items()}

    def message(self, lang: str = "en") -> str:
        from calculator.core.messages import text

        return text(f"error.{self.code}", lang, **self.shown_params(lang))
