"""The layers of DESIGN.md, read from the import statements: the engine never reaches the page,
a model is resolved in one place (calculator/models/seam.py), and no file grows past ~500 lines.

A model id followed from a widget to its count enters at most four files: the widget, the
widgets' shared inputs (guide/inputs/common.py), the model seam and the meta-device counter.
From a CLI command: the command, its shared options (commands/_common.py), the seam, the counter.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for folder in ("calculator", "guide") for p in (ROOT / folder).rglob("*.py"))
# The modules behind the seam: how a config becomes a model, a Hub answer, a checkpoint header.
BEHIND_THE_SEAM = {"calculator.models.meta", "calculator.models.configs", "calculator.models.hub", "calculator.models.safetensors"}
# Who may still import them, and why.
SEAM_USERS = {
    "calculator.models.seam": "the seam itself",
    "calculator.models.catalog": "refreshing the bundled counts is the counter's own batch job",
    "calculator.distributed.offload": "accelerate's placement needs the built meta model, not its count",
    "calculator.models.build_worker": "the process in which the seam builds a reader's config",
    "calculator.cli.commands.safetensors": "the `safetensors` command reads a local file's header",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, relative imports made absolute, at any depth of the file
    (the engine imports lazily inside functions)."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            found.add(name)
            found |= {f"{name}.{alias.name}" for alias in node.names}
    return found


def test_the_sources_are_found():
    assert len(SOURCES) > 60
    assert "calculator.cli.commands.train" in {module_name(p) for p in SOURCES}


@pytest.mark.parametrize("path", [p for p in SOURCES if p.parts[-2] != "guide" and "calculator" in p.parts],
                         ids=lambda p: module_name(p))
def test_the_engine_never_imports_the_page(path):
    bad = {name for name in imports_of(path) if name.split(".")[0] in ("guide", "streamlit", "plotly")}
    assert not bad, f"{module_name(path)} imports {bad}"


def test_only_the_seam_reaches_behind_it():
    users = {}
    for path in SOURCES:
        name = module_name(path)
        if name in BEHIND_THE_SEAM:
            continue
        reached = {m for m in imports_of(path) if any(m == s or m.startswith(s + ".") for s in BEHIND_THE_SEAM)}
        if reached:
            users[name] = reached
    assert set(users) <= set(SEAM_USERS), {k: v for k, v in users.items() if k not in SEAM_USERS}
    assert "calculator.models.seam" in users, "the seam counts models through the meta-device counter"


def test_a_widget_reaches_the_count_in_four_files():
    """estimator widget -> inputs/common.py (case_inputs) -> calculator/models/seam.py -> meta.py."""
    widget = imports_of(ROOT / "guide/widgets/estimator.py")
    common = imports_of(ROOT / "guide/inputs/common.py")
    seam = imports_of(ROOT / "calculator/models/seam.py")
    assert "guide.inputs.common" in widget and not widget & BEHIND_THE_SEAM
    assert "calculator.models.seam" in common and not common & BEHIND_THE_SEAM
    assert "calculator.models.meta" in seam


def test_a_command_reaches_the_count_in_four_files():
    command = imports_of(ROOT / "calculator/cli/commands/estimate.py")
    shared = imports_of(ROOT / "calculator/cli/commands/_common.py")
    assert "calculator.cli.commands._common" in command and not command & BEHIND_THE_SEAM
    assert "calculator.models.seam" in shared and not shared & BEHIND_THE_SEAM


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: module_name(p))
def test_no_file_is_over_500_lines(path):
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= 500, f"{module_name(path)}: {lines} lines; split it along its seams"


def test_no_two_page_modules_import_each_other():
    """An import circle (guide/url_values.py and the widgets' frame once imported each other)
    works only by the order in which Python happens to load them: the widget package reaches
    the URL checks, and the page hands them what the widgets declare."""
    page = {module_name(p): imports_of(p) for p in SOURCES if p.parts[-2] != "calculator" and "guide" in p.parts}
    circles = sorted((a, b) for a in page for b in page if a < b and b in page[a] and a in page[b])
    assert not circles, circles


def declares_a_widget(path: Path) -> bool:
    """Whether a module assigns WIDGET at its top level (what the registry looks for)."""
    return any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "WIDGET" for t in node.targets)
               for node in ast.parse(path.read_text(encoding="utf-8")).body)


def test_the_widget_package_holds_only_widgets():
    """The registry imports every module of guide/widgets/ as a widget: shared inputs and
    figures live in guide/inputs/."""
    modules = [p for p in (ROOT / "guide/widgets").glob("*.py") if p.name != "__init__.py"]
    assert len(modules) > 30
    assert [module_name(p) for p in modules if not declares_a_widget(p)] == []
    assert declares_a_widget(ROOT / "guide/widgets/estimator.py")
    assert not declares_a_widget(ROOT / "guide/inputs/common.py")


# The engine's layers, lowest first (docs/layers.md). A module may import its own layer and the
# layers below it, never one above: facts and units < the model seam < memory of one process <
# training < several devices < serving < answers < the command line.
LAYER_ORDER = ("core", "models", "memory", "training", "distributed", "serving", "answers", "cli")
# Imports that climb, each with its reason (keep this short).
CLIMBS = {
    ("calculator.models.build_worker", "calculator.distributed.offload_plan"):
        "the bounded worker runs the offload placement on the model it has just built, so a reader's "
        "model is never built in the server; the job is the offloading layer's",
}


def allowed_climb(module: str, target: str) -> bool:
    return any(module == who and (target == what or target.startswith(what + ".")) for who, what in CLIMBS)


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "calculator" or len(parts) < 2 or parts[1] not in LAYER_ORDER:
        return None
    return LAYER_ORDER.index(parts[1])


def test_every_engine_module_sits_in_a_layer():
    loose = [module_name(p) for p in SOURCES if p.parts[-2] == "calculator" and p.stem not in ("__init__", "__main__")]
    assert not loose, f"modules outside the layers: {loose}"


@pytest.mark.parametrize("path", [p for p in SOURCES if layer_of(module_name(p)) is not None],
                         ids=lambda p: module_name(p))
def test_a_layer_imports_only_the_layers_below_it(path):
    own = layer_of(module_name(path))
    name = module_name(path)
    above = {m for m in imports_of(path) if (layer_of(m) or 0) > own and not allowed_climb(name, m)}
    assert not above, f"{module_name(path)} ({LAYER_ORDER[own]}) imports {above} from a higher layer"


# The one circle the engine keeps, on purpose: a reader's model is built in a bounded worker
# process, and that worker runs the same seam, header reader and placement code the server
# would (models.build_worker imports them; models.seam and models.safetensors ask
# models.builder for a worker). Two processes, one code: no other module may join it.
DECLARED_CIRCLE = frozenset({"calculator.models.build_worker", "calculator.models.builder",
                             "calculator.models.worker_template", "calculator.models.seam",
                             "calculator.models.safetensors", "calculator.distributed.offload_plan"})


def engine_circles() -> list[frozenset[str]]:
    """The import circles among the engine's modules (strongly connected components of more
    than one module; function-local imports count, as at run time)."""
    modules = {module_name(p): p for p in SOURCES if "calculator" in p.parts}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in imports_of(path):
            parts = imported.split(".")
            target = next((".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in modules), None)
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:  # Tarjan's algorithm, as a recursion: the graph has ~200 nodes
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            circle = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                circle.add(member)
                if member == node:
                    break
            if len(circle) > 1:
                circles.append(frozenset(circle))

    for node in graph:
        if node not in index:
            visit(node)
    return circles


def test_no_import_circle_in_the_engine_but_the_build_workers():
    circles = engine_circles()
    assert [c for c in circles if c != DECLARED_CIRCLE] == [], "import circles: " + "; ".join(
        " <-> ".join(sorted(c)) for c in circles if c != DECLARED_CIRCLE)
    assert DECLARED_CIRCLE in circles, "the build worker no longer closes a circle: drop DECLARED_CIRCLE"
