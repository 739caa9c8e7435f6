"""Name facts a lowering needs before it starts: which names are bound exactly once (those may
hold compile-time constants), and what to write instead of an unsupported statement."""

from __future__ import annotations

import ast
import functools
from collections import Counter


def assigned_once(tree: ast.FunctionDef) -> set:
    """Names bound by exactly one plain assignment and nowhere else (``buf[i] = ...`` does not
    bind ``buf``; ``a, b = PAIRS`` binds ``a`` and ``b`` as plainly as ``a = PAIRS[0]``), and not
    in a conditional part (an ``if``, a ``while``, a run-time loop) of an unrolled loop: a name
    bound there holds the value of the last copy that ran, which only the run time knows."""
    counts: Counter = Counter()
    plain: Counter = Counter()
    for node, conditional in _statements(tree.body, unrolled=False, conditional=False):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for name in _bound(t):
                    counts[name] += 1
                    plain[name] += not conditional
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
            for name in _bound(node.target):
                counts[name] += 1
    return {n for n, c in counts.items() if c == 1 and plain[n] == 1}


def _statements(body: list, unrolled: bool, conditional: bool):
    """(statement, whether it runs conditionally inside an unrolled loop) for every statement of
    ``body``, nested ones included."""
    for node in body:
        yield node, conditional
        if isinstance(node, ast.For):
            runtime = isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) \
                and node.iter.func.id in ("range", "bits", "prange")
            inner = conditional or (unrolled and runtime)
            yield from _statements(node.body + node.orelse, unrolled or not runtime, inner)
        elif isinstance(node, (ast.If, ast.While)):
            yield from _statements(node.body + node.orelse, unrolled, conditional or unrolled)
        elif isinstance(node, (ast.With, ast.Try)):  # refused later, with a hint
            yield from _statements(node.body, unrolled, conditional)


@functools.lru_cache(maxsize=256)
def local_names(tree: ast.FunctionDef) -> frozenset:
    """Every name the function binds anywhere (once per parsed function: a kernel looks a
    module-level name up at each use)."""
    return frozenset(name for node in ast.walk(tree) for target in _targets(node)
                     for name in _bound(target))


def _targets(node: ast.AST) -> list:
    if isinstance(node, ast.Assign):
        return node.targets
    return [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) else []


def binding_lines(tree: ast.FunctionDef, name: str) -> list:
    """The lines that bind ``name`` (assignments, ``op=``, annotated assignments, loop targets),
    in order."""
    if name not in local_names(tree):
        return []
    return sorted({node.lineno for node in ast.walk(tree)
                   if any(name in _bound(t) for t in _targets(node))})


def unbound(name: str, lines: list) -> tuple[str, str]:
    """(message, what to write instead) for a read of the local ``name`` (bound at ``lines``)
    above every assignment to it: a value carried from one iteration of a loop to the next
    but first bound further down the loop (``s += prev`` above ``prev = x[i]``), or a name
    bound only under a constant-false ``if``. A variable takes its type from its first
    assignment, which the lowering has not met yet; Python would read the module-level name
    of that spelling nowhere in the function (UnboundLocalError if no iteration bound it)."""
    where = ", ".join(map(str, lines))
    return (f"'{name}' is read above its first assignment (line {where}): a variable takes "
            f"its type from an assignment above its first read, even where a loop's first "
            f"iteration skips the read", f"a first value before the loop, `{name} = ...`")


def _bound(target: ast.expr) -> list:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _bound(t)]
    return []


EXPR_HINTS = {
    "List": "a tuple `(a, b)` for static values, or `local(f32, n)` for an array",
    "ListComp": "a loop",
    "DictComp": "a loop",
    "SetComp": "a loop",
    "GeneratorExp": "a loop",
    "Dict": "separate variables",
    "Lambda": "a module-level helper decorated with @inline",
    "JoinedStr": "numbers only (kernels have no strings)",
    "Starred": "explicit arguments",
    "NamedExpr": "a separate assignment",
}

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
