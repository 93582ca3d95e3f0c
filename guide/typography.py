"""French typography for the UI: the pure functions live in calculator/core/typography.py (the CLI's
French answers use them too); importing this module registers them for every French message."""

from __future__ import annotations

from calculator.core.messages import set_finisher
from calculator.core.typography import NNBSP, for_language, french

__all__ = ["NNBSP", "for_language", "french"]

set_finisher("fr", french)
