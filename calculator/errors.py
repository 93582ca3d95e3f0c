"""Errors the calculator reports to people: a code, its parameters, a message per language."""

from __future__ import annotations


class CalculatorError(Exception):
    """Bad input or an unreachable source. `code` names the message in the UI catalogs
    (key "error.<code>"), so the CLI and the guide say the same thing in each language."""

    def __init__(self, code: str, **params: object) -> None:
        self.code = code
        self.params = {key: str(value) for key, value in params.items()}
        super().__init__(self.message("en"))

    def message(self, lang: str = "en") -> str:
        from .messages import text

        return text(f"error.{self.code}", lang, **self.params)
