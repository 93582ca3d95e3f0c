"""Verdicts belong to the engine (calculator/answers/verdicts.py, budget.py): nothing under guide/ or
calculator/cli/commands/ compares byte quantities or computes a verdict itself (DESIGN.md, "Every
verdict comes from one answer function")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = sorted([*(ROOT / "guide").rglob("*.py"), *(ROOT / "calculator" / "cli" / "commands").rglob("*.py")])
BYTE_WORDS = {"capacity", "budget", "usable", "memory"}  # names that stand for a byte count
VERDICT_CALLS = {"verdict_for", "admits", "fits", "reserved_bytes"}  # the engine's own comparisons
# Comparisons of bytes that are no verdict, each with its reason.
ALLOWED = {("guide/widgets/distributed.py", "highest"): "the chart's axis range: bars far above the card are cut"}


def names_in(node: ast.AST) -> set[str]:
    """What an expression's operands are: variables, the last attribute of a chain
    (`card.memory_bytes` is memory_bytes, not card), string keys of subscripts."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return {node.slice.value}
    if isinstance(node, ast.Call):  # a call's result is what it computes, not its arguments
        return names_in(node.func)
    return set().union(*(names_in(child) for child in ast.iter_child_nodes(node)))


def is_byte_name(name: str) -> bool:
    """A byte quantity: *_bytes, or a budget/capacity/usable/memory. Upper-case
    constants are bounds on what a reader may type (an input check), not verdicts."""
    if name.isupper():
        return False
    lowered = name.lower()
    return lowered.endswith("bytes") or lowered in BYTE_WORDS


def offences(source: str, path: str = "") -> list[str]:
    """Comparisons of a byte quantity with another (a sign check against 0 is none), and
    calls of the engine's verdict helpers."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and not all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                                                      for op in node.ops):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value == 0 for o in operands):
                continue
            byte_names = sorted(n for operand in operands for n in names_in(operand) if is_byte_name(n))
            if byte_names and not any((path, n) in ALLOWED for o in operands for n in names_in(o)):
                found.append(f"line {node.lineno}: compares {', '.join(byte_names)}")
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in VERDICT_CALLS:
                found.append(f"line {node.lineno}: calls {called}()")
    return found


def test_the_scan_finds_what_it_looks_for():
    """The check can fail: each kind of offence is caught, and plain counts are not."""
    assert offences("ok = peak.total_bytes <= card.memory_bytes")
    assert offences("ok = row['memory_bytes'] > limit")
    assert offences("mark = budget.verdict_for(size)")
    assert offences("fits = reserved_bytes(b, b) < 3")
    assert offences("x = 1 if used < capacity else 2")
    assert not offences("ok = batch <= largest and tokens > 1")
    assert not offences("ok = answer.verdict == 'fits'")
    assert not offences("ok = card is not None and 'model' in keys")
    assert not offences("same = memory.attention_used == memory.attention")
    assert not offences("bad = not 0 <= size <= MAX_SIZE_BYTES")
    assert offences("cut = highest > 4 * budget.usable_bytes")
    assert not offences("cut = highest > 4 * budget.usable_bytes", "guide/widgets/distributed.py")


def test_no_byte_comparison_outside_the_engine():
    assert any("cli/commands" in str(path) for path in SCANNED) and any("guide" in path.parts for path in SCANNED)
    found = {str(path.relative_to(ROOT)): offences(path.read_text(), str(path.relative_to(ROOT))) for path in SCANNED}
    found = {path: lines for path, lines in found.items() if lines}
    assert not found, f"these files compare bytes themselves: {found}"
