"""A local read above every assignment to it (a value carried to the next iteration of a loop
but first bound further down it) is a compile error at the read naming the assignment's line:
it said "name 'prev' is not defined; write a parameter, a static parameter or a module-level
constant", and with a module-level name of that spelling it read that constant, where Python
takes the name as the local throughout the function."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuvil_perception.compile.lang import Buf, f64, i64, kernel
from cuvil_perception.errors import KernelSourceError
from test_lang import line_of as lang_line_of

THIS = Path(__file__).resolve()
prev = 100.0  # a module-level name a kernel's local hides (as in Python)


def line_of(marker: str) -> int:
    return lang_line_of(marker, THIS)


@kernel(name="test.unbound_guarded")
def guarded(x: Buf[f64, "n"], n: i64) -> f64:
    s = 0.0
    for i in range(n):
        if i > 0:
            s += prev * x[i]  # @guarded
        prev = x[i]  # @guarded-binds
    return s


@kernel(name="test.unbound_plain")
def plain(x: Buf[f64, "n"], n: i64) -> f64:
    s = 0.0
    for i in range(n):
        s += last  # @plain
        last = x[i]
    return s


@kernel(name="test.unbound_while")
def in_while(x: Buf[f64, "n"], n: i64) -> f64:
    s, i = 0.0, 0
    while i < n:
        if i > 0:
            s += held  # @while
        held = x[i]
        i += 1
    return s


@pytest.mark.parametrize("fn, marker, name", [(guarded, "@guarded", "prev"),
                                               (plain, "@plain", "last"),
                                               (in_while, "@while", "held")])
def test_a_loop_carried_name_read_above_its_assignment_is_an_error_at_the_read(fn, marker, name):
    with pytest.raises(KernelSourceError) as info:
        fn(np.arange(4, dtype=np.float64), 4)
    message = str(info.value)
    assert message.startswith(f"{THIS}:{line_of(marker)}:"), message
    assert f"'{name}' is read above its first assignment (line " in message, message
    assert f"write a first value before the loop, `{name} = ...` instead" in message
    if fn is guarded:  # the module-level `prev` is not read instead (Python: the local)
        assert f"(line {line_of('@guarded-binds')})" in message
        assert fn.py_func(np.arange(4, dtype=np.float64), 4) == 0 * 1 + 1 * 2 + 2 * 3


@kernel(name="test.unbound_after")
def after(x: Buf[f64, None], n: i64) -> f64:
    for i in range(n):
        last = x[i]
    return last


def test_a_name_bound_in_a_loop_and_read_after_it_still_reads_0_when_the_loop_did_not_run():
    """The documented rule (kernel-language.md: a variable read where no path assigned it)."""
    x = np.arange(1, 5, dtype=np.float64)
    assert after(x, 4) == 4.0 and after(x, 0) == 0.0
