"""The kernel-language compiler keeps the style guide's module size (files < ~400 lines, one job
each): the lowering is split by construct (loops in ``loop_lower``, slices, vectors, SIMD, calls,
expressions), and a module that outgrows the limit is split again, not trimmed."""

from __future__ import annotations

from pathlib import Path

import cuvil_perception.compile.lang as lang
from cuvil_perception.compile.lang.lower import Lowerer
from cuvil_perception.compile.lang.loop_lower import MAX_UNROLL, LoopMixin

MAX_LINES = 400


def test_every_lang_module_is_at_most_400_lines():
    folder = Path(lang.__file__).parent
    sizes = {p.name: len(p.read_text().splitlines()) for p in folder.glob("*.py")}
    assert len(sizes) > 10
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_loops_are_lowered_by_the_loop_mixin():
    assert issubclass(Lowerer, LoopMixin) and MAX_UNROLL == 4096
    for name in ("s_While", "s_For", "for_range", "unrolled", "s_Break", "s_Continue"):
        assert getattr(Lowerer, name) is getattr(LoopMixin, name)
