"""No import cycles in the package, function-level imports included (issue 32).

Every ``import`` / ``from ... import`` anywhere in a module (top level, inside functions, under
``if TYPE_CHECKING``) is an edge to the module it names: ``from .x import y`` goes to ``x.y``
when that is a module, else to ``x``; a package's ``__init__`` is a module of its own, and the
parent packages Python runs first are not edges (every submodule would be in a cycle with its
package). A cycle is a strongly connected component of more than one module.

``ALLOWED`` was the list of cycles that issue 32 removed; it is empty and stays so: a cycle
anywhere fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cuvil_perception"

ALLOWED: set[frozenset[str]] = set()  # every cycle is gone; keep it so
NO_CYCLES_UNDER = ("drives", "ops")


def _modules(root: Path) -> dict[str, Path]:
    """Dotted name relative to the package ("" is the package itself) -> file."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _local(dotted: str, modules: dict[str, Path]) -> str | None:
    """The package module an absolute dotted name loads (its longest existing prefix), or None
    outside the package."""
    if dotted != PACKAGE.name and not dotted.startswith(PACKAGE.name + "."):
        return None
    name = dotted[len(PACKAGE.name) + 1:]
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in modules else None


def _targets(name: str, path: Path, node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """The package modules one import statement of module ``name`` loads (see the docstring)."""
    if isinstance(node, ast.Import):
        return [t for a in node.names if (t := _local(a.name, modules)) is not None]
    prefix = node.module or ""
    if node.level:  # relative: against the importing module's package
        package = [PACKAGE.name] + [p for p in name.split(".") if p]
        if path.name != "__init__.py":
            package.pop()
        prefix = ".".join(package[:len(package) - node.level + 1] + ([prefix] if prefix else []))
    found = []
    for alias in node.names:  # ``from x import y``: the module x.y when there is one, else x
        target = _local(f"{prefix}.{alias.name}", modules)
        if target != f"{prefix}.{alias.name}"[len(PACKAGE.name) + 1:]:
            target = _local(prefix, modules)
        if target is not None:
            found.append(target)
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its body."""
    modules = _modules(root)
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name].update(t for t in _targets(name, path, node, modules) if t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_no_cycle_outside_the_allowed_list():
    found = set(cycles(import_graph()))
    assert not [sorted(c) for c in found - ALLOWED]
    in_drives_or_ops = [sorted(c) for c in found
                        if any(m.split(".")[0] in NO_CYCLES_UNDER for m in c)]
    assert not in_drives_or_ops


def test_the_allowed_list_only_shrinks():
    """An allowed cycle that is gone is deleted from ``ALLOWED``, so it cannot come back."""
    assert not [sorted(c) for c in ALLOWED - set(cycles(import_graph()))]
    assert not [c for c in ALLOWED if any(m.split(".")[0] in NO_CYCLES_UNDER for m in c)]


def test_the_checker_sees_function_level_and_relative_cycles(tmp_path):
    """A cycle closed only by an import inside a function, written relative, is found."""
    pkg = tmp_path / "cuvil_perception"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ops" / "__init__.py").write_text("from . import a\n")
    (pkg / "ops" / "a.py").write_text("from .b import thing\n")
    (pkg / "ops" / "b.py").write_text("def thing():\n    from ..ops.a import x\n")
    (pkg / "ops" / "c.py").write_text("import cuvil_perception.ops.b\n")
    graph = import_graph(pkg)
    assert graph["ops.c"] == {"ops.b"} and graph["ops"] == {"ops.a"}
    assert cycles(graph) == [frozenset({"ops.a", "ops.b"})]
