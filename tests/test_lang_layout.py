"""The kernel-language compiler keeps the style guide's module size (files < ~400 lines, one job
each): the lowering is split by concept (statements, loops, expressions, calls, slices, vectors,
SIMD), one dispatcher table maps node types to the functions, and every module stays under the
limit."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import cuvil_perception.compile.lang as lang
from cuvil_perception.compile.lang import loop_lower
from cuvil_perception.compile.lang.expr import Values
from cuvil_perception.compile.lang.lower import EXPRESSIONS, STATEMENTS, Lowerer
from cuvil_perception.compile.lang.loop_lower import MAX_UNROLL

MAX_LINES = 400


def test_every_lang_module_is_at_most_400_lines():
    folder = Path(lang.__file__).parent
    sizes = {p.name: len(p.read_text().splitlines()) for p in folder.glob("*.py")}
    assert len(sizes) > 10
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_one_table_maps_each_node_type_to_its_lowering_function():
    """The dispatcher is two tables (issue 32): loops are lowered by `loop_lower`'s functions,
    no lowering module keeps a handler found by name (``s_For``, ``e_Call``), and the Lowerer
    has one base (`expr.Values`), not a chain of mixins."""
    assert MAX_UNROLL == 4096
    for node, name in ((ast.While, "lower_while"), (ast.For, "lower_for"),
                       (ast.Break, "lower_break"), (ast.Continue, "lower_continue")):
        assert STATEMENTS[node] is getattr(loop_lower, name)
    assert ast.Call in EXPRESSIONS and ast.Lambda not in EXPRESSIONS
    assert Lowerer.__bases__ == (Values,)
    folder = Path(lang.__file__).parent
    for path in folder.glob("*.py"):
        assert not re.search(r"def [se]_[A-Z]|class \w+Mixin", path.read_text()), path.name
