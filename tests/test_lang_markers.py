"""Role markers (`compile.lang.markers`): the documented signature comes from the annotations,
changes nothing in the compiled code, and a marker that contradicts its type is an error at the
annotation (kernel writers' mistakes: a `KernelSourceError` with the file:line, or a
`TypeError` where Python evaluates the brackets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuvil_perception.compile.lang import (Buf, In, InOut, Out, Scratch, State, f32, i32, i64,
                                           kernel)
from cuvil_perception.compile.render_ir import render
from cuvil_perception.errors import KernelSourceError

THIS = Path(__file__).name


@kernel(name="markers.scale")
def plain(x: Buf[f32, None, 4], n: i64, out: Buf[f32, "cap"], tmp: Buf[i32], *, cap: int):
    for i in range(n):
        tmp[i] = i
        out[i] = x[i, 2] * 2.0


@kernel(name="markers.scale")
def marked(x: Buf[f32, None, 4, In("m", "points", rows="n")], n: i64[In("rows", most="cap")],
           out: Buf[f32, "cap", Out("m")], tmp: Buf[i32, Scratch(shape=("cap",), dtype="u32")], *,
           cap: int):
    for i in range(n):
        tmp[i] = i
        out[i] = x[i, 2] * 2.0


def test_markers_change_nothing_in_the_compiled_code():
    assert render(plain.spec(cap=8)) == render(marked.spec(cap=8))
    assert plain.spec(cap=8).args == marked.spec(cap=8).args


def test_the_documented_signature_reads_the_markers():
    docs = {a.name: (a.shape, a.unit, a.role, a.doc, a.most) for a in marked.spec(cap=8).arg_docs}
    assert docs == {"x": (("n", 4), "m", "in", "points", None),
                    "n": ((), "rows", "in", "", "cap"),
                    "out": (("cap",), "m", "out", "", None),
                    "tmp": (("cap",), "", "scratch", "", None)}
    assert [a.dtype for a in marked.spec(cap=8).arg_docs] == ["f32", None, "f32", "u32"]
    plain_docs = {a.name: (a.shape, a.role) for a in plain.spec(cap=8).arg_docs}
    assert plain_docs == {"x": (("?", 4), "inout"), "n": ((), "in"), "out": (("cap",), "inout"),
                          "tmp": (("?",), "inout")}


@kernel
def rows_on_known(x: Buf[f32, "cap", In(rows="n")], n: i64, *, cap: int):
    x[0] = 1.0


@kernel
def most_on_buffer(x: Buf[f32, "cap", State(most="cap")], *, cap: int):
    x[0] = 1.0


@kernel
def out_scalar(x: Buf[f32, "cap"], n: i64[Out("rows")], *, cap: int):
    x[0] = 1.0


@kernel
def shape_on_scalar(x: Buf[f32, "cap"], n: i64[In(shape=(4,))], *, cap: int):
    x[0] = 1.0


@kernel
def most_on_float(x: Buf[f32, "cap"], a: f32[In(most=3)], *, cap: int):
    x[0] = a


@kernel
def wrong_dtype(x: Buf[i64, "cap", Scratch(dtype="f32")], *, cap: int):
    x[0] = 1


@kernel
def wrong_size(x: Buf[f32, "cap", 4, InOut(shape=("cap", 3))], *, cap: int):
    x[0, 0] = 1.0


@pytest.mark.parametrize("k, message", [
    (rows_on_known, "rows= sizes an open first extent (None), and its first extent is 'cap'"),
    (most_on_buffer, "most= bounds a scalar"),
    (out_scalar, "scalar 'n' is passed by value: its role is In"),
    (shape_on_scalar, "rows=, shape= and dtype= describe buffers"),
    (wrong_dtype, "dtype='f32' is not a buffer type of i64's size"),
    (most_on_float, "most= bounds an int scalar"),
    (wrong_size, "holds 24 elements, the annotation's extents 32"),
])
def test_a_marker_that_contradicts_its_type_is_an_error_at_the_annotation(k, message):
    with pytest.raises(KernelSourceError) as err:
        k.spec(cap=8)
    assert message in str(err.value)
    assert f"{THIS}:" in str(err.value)  # file:line of the annotation


@pytest.mark.parametrize("make, message", [
    (lambda: Buf[f32, In("m"), 4], "the role marker In('m') goes last"),
    (lambda: i64["rows"], "i64[...]: takes a role marker"),
    (lambda: In(3), "unit must be a string"),
    (lambda: Out(shape=[4]), "a tuple of ints and expressions"),
    (lambda: Scratch(rows="n", shape=(4,)), "give rows or shape, not both"),
    (lambda: In(most=1.5), "an int or an expression"),
    (lambda: State(dtype=8), "a type name such as"),
])
def test_a_malformed_marker_is_a_type_error_where_python_reads_it(make, message):
    with pytest.raises(TypeError) as err:
        make()
    assert message in str(err.value)
