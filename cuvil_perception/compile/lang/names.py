"""Name facts a lowering needs before it starts: which names are bound exactly once (those may
hold compile-time constants), and what to write instead of an unsupported statement."""

from __future__ import annotations

import ast
from collections import Counter


def assigned_once(tree: ast.FunctionDef) -> set:
    """Names bound by exactly one plain assignment and nowhere else (``buf[i] = ...`` does not
    bind ``buf``)."""
    counts: Counter = Counter()
    plain: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for name in _bound(t):
                    counts[name] += 1
                    plain[name] += isinstance(t, ast.Name)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
            for name in _bound(node.target):
                counts[name] += 1
    return {n for n, c in counts.items() if c == 1 and plain[n] == 1}


def _bound(target: ast.expr) -> list:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _bound(t)]
    return []


STMT_HINTS = {
    "With": "plain statements (kernels have no context managers)",
    "Try": "checks that return an error code",
    "Raise": "a returned error code (or a debug build for index errors)",
    "FunctionDef": "a module-level helper decorated with @inline",
    "Lambda": "a module-level helper decorated with @inline",
    "Global": "a parameter or a static parameter",
    "Nonlocal": "a parameter",
    "Delete": "nothing (locals end with the kernel)",
    "Assert": "an `if` that returns an error code",
    "Import": "a module-level import",
    "ImportFrom": "a module-level import",
    "Match": "if/elif/else",
}
