"""`refresh-catalog`: recompute the catalog's stored counts (maintainers, after changing a
config or upgrading transformers)."""

from __future__ import annotations

from calculator.models import catalog
from calculator.cli.commands._common import add_command


def register(commands, shared) -> None:
    add_command(commands, "refresh-catalog", shared, (), run, help="recompute the stored catalog counts (maintainers)")


def run(args) -> int:
    print(catalog.refresh())
    return 0
