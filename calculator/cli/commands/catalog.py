"""`catalog`: the bundled models."""

from __future__ import annotations

from calculator.models import catalog
from calculator.core.units import format_count
from calculator.cli.commands._common import add_command, print_json, render_table


def register(commands, shared) -> None:
    add_command(commands, "catalog", shared, (), run, help="the bundled models") \
        .add_argument("--json", action="store_true", help="one JSON object")


def run(args) -> int:
    models = []
    for entry in catalog.entries():
        s = catalog.stored_summary(entry.key)
        models.append({"name": entry.key, "id": entry.id, "kind": entry.kind, "attention": entry.attention,
                       "tags": list(entry.tags), "architecture": s.architecture, "parameters": s.parameters,
                       "active_parameters": s.active_parameters})
    if args.json:
        print_json({"models": models, "versions": catalog.stored_versions()})
        return 0
    rows = [[m["name"], m["id"], m["kind"], m["attention"].upper(), format_count(m["parameters"]),
             ", ".join(m["tags"])] for m in models]
    print(render_table(["name", "Hub id", "kind", "attention", "parameters", "notes"], rows))
    return 0
