"""The command line stands on public APIs (issue 22): no module under ``harness/cli/`` imports a
private ``repos._...`` module or calls a repository's ``_publish``; its modules import each
other without a circle (``TYPE_CHECKING`` imports included); there is one offline model."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "harness" / "cli"


def _trees() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(CLI.glob("*.py"))}


def test_no_private_repos_module_and_no_publish() -> None:
    found = []
    for name, tree in _trees().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("repos._"):
                found.append((name, node.module))
            if isinstance(node, ast.Import):
                found += [(name, a.name) for a in node.names if a.name.startswith("repos._")]
            if isinstance(node, ast.Attribute) and node.attr == "_publish":
                found.append((name, "._publish"))
    assert found == []


def _imports(tree: ast.Module) -> set[str]:
    """The sibling modules a CLI module imports (``from ._x import ...``), at any depth."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out.add(node.module)
    return out


def test_the_cli_modules_import_each_other_without_a_circle() -> None:
    trees = _trees()  # parsed once: per module it made the test quadratic in the CLI's size
    graph = {name: _imports(tree) & set(trees) for name, tree in trees.items()}
    assert "_chat" not in graph["_chat_commands"]
    seen: set[str] = set()
    stack: list[str] = []

    def visit(node: str) -> None:
        assert node not in stack, f"import circle: {' -> '.join([*stack, node])}"
        if node in seen:
            return
        stack.append(node)
        for child in sorted(graph[node]):
            visit(child)
        stack.pop()
        seen.add(node)

    for node in sorted(graph):
        visit(node)


def test_one_offline_model() -> None:
    makers = [
        name
        for name, tree in _trees().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "FauxModel"
    ]
    assert makers == ["_offline", "_offline"]  # paced and not: one reply function
