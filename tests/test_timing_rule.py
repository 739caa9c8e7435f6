"""The project rule "speed goes in benchmarks/, never absolute-ms assertions in tests", checked.

The machine running the suite is shared and noisy, so an ``assert elapsed < 30`` passes or fails
with the load, not with the code. This test reads every test file and refuses an ``assert`` that
compares a wall-clock duration (a difference involving ``time.perf_counter()``,
``time.monotonic()``, ``time.time()`` or their ``_ns`` forms, directly or through a variable)
with a number. Compare against a reference measured in the same run, count the work done, or put
the measurement in a benchmark script. Waiting with a timeout (``while time.monotonic() <
deadline``) is not an assertion and is fine; so is a fake clock (``clock.now_ns()``).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLOCKS = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns"}


def _is_clock_call(node: ast.AST) -> bool:
    """``time.perf_counter()``, ``perf_counter()``, ... (the real clocks, not a fake one)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr in CLOCKS and isinstance(func.value, ast.Name) and \
            func.value.id == "time"
    return isinstance(func, ast.Name) and func.id in CLOCKS - {"time"}


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _is_number(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_number(node.left) and _is_number(node.right)
    return False


def _is_zero(node: ast.AST) -> bool:
    """A number expression (``_is_number``) whose value is 0."""
    try:
        return eval(compile(ast.Expression(node), "<bound>", "eval"), {"__builtins__": {}}) == 0
    except ArithmeticError:
        return False


class _Finder(ast.NodeVisitor):
    """Collects ``file:line`` of asserts comparing a measured duration with a number."""

    def __init__(self, path: Path):
        self.path, self.found = path, []
        self.clock_names: set[str] = set()  # began = time.perf_counter()
        self.durations: set[str] = set()  # elapsed = time.perf_counter() - began

    def _reads_clock(self, node: ast.AST) -> bool:
        return _is_clock_call(node) or (isinstance(node, ast.Name) and
                                        node.id in self.clock_names)

    def _is_duration(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.durations:
                return True
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Sub) and \
                    (self._reads_clock(sub.left) or self._reads_clock(sub.right)):
                return True
        return False

    def visit_Assign(self, node: ast.Assign) -> None:
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if _is_clock_call(node.value):
            self.clock_names.update(names)
        elif self._is_duration(node.value):
            self.durations.update(names)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            sides = [compare.left, *compare.comparators]
            bounds = [s for s in sides if _is_number(s) and not _is_zero(s)]
            if bounds and any(self._is_duration(s) for s in sides):  # > 0 is no speed claim
                self.found.append(f"{os.path.relpath(self.path)}:{node.lineno}")


def absolute_time_asserts(paths) -> list[str]:
    found = []
    for path in sorted(paths):
        finder = _Finder(path)
        finder.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found += finder.found
    return found


def test_no_test_asserts_an_absolute_wall_clock_bound():
    assert absolute_time_asserts(TESTS.rglob("*.py")) == []


def test_the_checker_finds_the_usual_forms(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nbegan = time.perf_counter()\nwork()\n"
                   "elapsed = time.perf_counter() - began\nassert elapsed < 30.0\n"
                   "assert (time.monotonic() - began) * 1e3 <= 5\n"
                   "assert 0 < elapsed < 2 * 60\n")
    good = tmp_path / "good.py"
    good.write_text("import time\ndeadline = time.monotonic() + 40\n"
                    "while time.monotonic() < deadline:\n    pass\n"
                    "began = time.perf_counter()\nref = time.perf_counter() - began\n"
                    "elapsed = time.perf_counter() - began\nassert elapsed < 3 * ref\n"
                    "assert clock.now_ns() - start >= 500_000_000\nassert elapsed > 0\n")
    found = absolute_time_asserts([bad, good])
    assert [f.rsplit(":", 1)[1] for f in found] == ["5", "6", "7"]
