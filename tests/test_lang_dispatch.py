"""``kernel(...)``'s fast path (`compile.lang.dispatch`): a call whose static values were seen
before runs through a cached entry, which refuses exactly what the full call refuses (same
exception, same message) and gives the same results; other dtypes / static values take
another entry."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from cuvil_perception.compile import compile_stats
from cuvil_perception.compile.lang import Buf, f32, f64, i32, i64, kernel
from cuvil_perception.compile.lang.arguments import checked_arguments
from cuvil_perception.compile.lang.dispatch import MISS, _no_native


@kernel(name="dispatch.axpy")
def axpy(x: Buf[f32, "n", 2], y: Buf[f32, "n", 2], a: f32, n: i64):
    for i in range(n):
        for j in range(2):
            y[i, j] += a * x[i, j]


@kernel(name="dispatch.scale")
def scale(x: Buf["T", "m"], y: Buf["T", "m"], *, T: str, m: int, k: int = 2):
    for i in range(m):
        y[i] = x[i] * k


@kernel(name="dispatch.total")
def total(x: Buf[f64, None], n: i32) -> f64:
    s = 0.0
    for i in range(n):
        s += x[i]
    return s


def _refusal(k, args, static):
    """The exception type and message the full call raises for ``args``, or None."""
    try:
        checked_arguments(k, k.spec(**static), args)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)
    return None


def _fresh(n=5):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    return x, np.ones((n, 2), np.float32)


def test_the_entry_runs_the_call_without_the_full_path_and_gives_the_same_result():
    x, y = _fresh()
    axpy(x, y, 2.0, 5)                        # the full call, which files the entry
    before = compile_stats().memory_hits
    y2 = np.ones_like(y)
    axpy(x, y2, 2.0, 5)
    axpy(x, y2, 2, 5)                         # an int for f32: converted, as the full path does
    assert compile_stats().memory_hits == before  # no spec built, no registry lookup
    want = np.ones_like(y)
    axpy.py_func(x, want, 2.0, 5)
    axpy.py_func(x, want, 2, 5)
    assert np.array_equal(y2, want)
    assert len(axpy._entries) == 1


BAD_CALLS = {
    "wrong dtype": lambda x, y: (x.astype(np.float64), y, 1.0, 5),
    "wrong rank": lambda x, y: (x.ravel(), y, 1.0, 5),
    "wrong extent": lambda x, y: (x[:4], y, 1.0, 5),
    "extent of a scalar": lambda x, y: (x, y, 1.0, 4),
    "non-contiguous": lambda x, y: (np.asfortranarray(np.ones((2, 2), np.float32)).T.copy()
                                    .T, y[:2], 1.0, 2),
    "non-contiguous rows": lambda x, y: (np.ones((10, 2), np.float32)[::2], y, 1.0, 5),
    "read-only where written": lambda x, y: (x, _read_only(y), 1.0, 5),
    "not an array": lambda x, y: (x.tolist(), y, 1.0, 5),
    "scalar of the wrong type": lambda x, y: (x, y, "2", 5),
    "int out of range": lambda x, y: (x, y, 1.0, 1 << 63),
    "too few arguments": lambda x, y: (x, y, 1.0),
    "aliasing": lambda x, y: (y, y, 1.0, 5),
    "byte-swapped dtype": lambda x, y: (x.astype(">f4"), y, 1.0, 5),
}


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_the_entry_refuses_what_the_full_call_refuses(case):
    x, y = _fresh()
    axpy(x, y, 1.0, 5)                        # files the entry
    args = BAD_CALLS[case](*_fresh())
    want = _refusal(axpy, args, {})
    assert want is not None, case             # the full path refuses it
    with pytest.raises(want[0]) as got:
        axpy(*args)
    assert str(got.value) == want[1]


def test_read_only_arrays_the_kernel_only_reads_are_accepted():
    x, y = _fresh()
    axpy(x, y, 1.0, 5)
    y2 = np.ones_like(y)
    axpy(_read_only(x), y2, 1.0, 5)
    assert np.array_equal(y2, y)


def test_other_dtypes_and_static_values_take_their_own_entries():
    for dtype, t, k in [(np.float32, "f32", 2), (np.float64, "f64", 2), (np.int32, "i32", 3),
                        (np.float32, "f32", 3)]:
        for _ in range(2):                    # the second call runs through the entry
            x = np.arange(4, dtype=dtype)
            y = np.zeros(4, dtype)
            scale(x, y, T=t, m=4, k=k)
            assert y.dtype == dtype and np.array_equal(y, x * k), (t, k)
    assert len(scale._entries) == 4
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(TypeError, match="must be a C-contiguous float64"):
        scale(x, np.zeros(4, np.float32), T="f64", m=4)  # an f32 array for T=f64
    with pytest.raises(TypeError, match="has shape"):
        scale(x, np.zeros(4, np.float32), T="f32", m=5, k=2)


def test_wrong_static_values_are_refused_after_an_entry_exists():
    x = np.arange(4, dtype=np.float32)
    scale(x, np.zeros(4, np.float32), T="f32", m=4)
    with pytest.raises(Exception, match=r"static parameters missing \['T'\]"):
        scale(x, np.zeros(4, np.float32), m=4)
    with pytest.raises(Exception, match="unknown"):
        scale(x, np.zeros(4, np.float32), T="f32", m=4, q=1)
    with pytest.raises(Exception):
        scale(x, np.zeros(4, np.float32), T="u1", m=4)  # not a type name


def test_open_extents_and_returned_values():
    x = np.arange(7, dtype=np.float64)
    assert total(x, 7) == total(x, 7) == 21.0
    assert total(x[:3].copy(), 3) == 3.0       # another length: the open extent is not fixed
    with pytest.raises(TypeError, match="float64"):
        total(x.astype(np.float32), 7)


def test_static_keys_tell_apart_what_json_tells_apart():
    from cuvil_perception.compile.lang.dispatch import static_key

    pairs = [({"a": 0.0}, {"a": -0.0}), ({"a": True}, {"a": 1}), ({"a": 1}, {"a": 1.0}),
             ({"a": (True,)}, {"a": (1,)}), ({"a": np.float64(0.0)}, {"a": np.float64(-0.0)})]
    for one, other in pairs:
        assert static_key(one) != static_key(other), (one, other)
    assert static_key({"a": 1, "b": "x"}) == static_key({"a": 1, "b": "x"})


def test_the_debug_switch_takes_another_entry(monkeypatch):
    x, y = _fresh()
    axpy(x, y, 1.0, 5)
    count = len(axpy._entries)
    monkeypatch.setenv("CUVIL_KERNEL_DEBUG", "1")
    y2 = np.ones_like(y)
    axpy(x, y2, 0.5, 5)
    axpy(x, y2, 0.5, 5)
    assert len(axpy._entries) == count + 1
    assert next(reversed(axpy._entries.values())).spec.error_record is not None


def test_specialize_binds_static_values_once_and_still_checks():
    x = np.arange(4, dtype=np.float32)
    f32_scale = scale.specialize(T="f32", m=4)
    y = np.zeros(4, np.float32)
    f32_scale(x, y)
    assert np.array_equal(y, x * 2)
    f32_scale(x, y, k=3)
    assert np.array_equal(y, x * 3)
    with pytest.raises(TypeError, match="must be a C-contiguous float32"):
        f32_scale(x.astype(np.float64), y)
    with pytest.raises(TypeError, match="already bound"):
        f32_scale(x, y, m=4)
    with pytest.raises(Exception, match="unknown static parameters"):
        scale.specialize(q=1)


@kernel(name="dispatch.add_rows")
def add_rows(x: Buf[f32, "n", 2], y: Buf[f32, "n", 2], *, n: int):
    for i in range(n):
        for j in range(2):
            y[i, j] += x[i, j]


def test_a_static_extent_is_bound_from_the_array_and_still_checked():
    for n in (3, 5, 3):
        x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
        y = np.ones((n, 2), np.float32)
        add_rows(x, y)                        # n from x's first axis
        assert np.array_equal(y, x + 1)
    with pytest.raises(TypeError, match="has shape"):
        add_rows(np.zeros((3, 2), np.float32), np.zeros((4, 2), np.float32))
    with pytest.raises(TypeError, match="has shape"):
        add_rows(np.zeros((3, 2), np.float32), np.zeros((3, 2), np.float32), n=4)
    with pytest.raises(Exception, match=r"static parameters missing \['n'\]"):
        add_rows(np.zeros(3, np.float32), np.zeros((3, 2), np.float32))  # not of 2 axes
    with pytest.raises(TypeError, match="must be a C-contiguous float32 array of 2 axes"):
        add_rows(np.zeros(3, np.float32), np.zeros((3, 2), np.float32), n=3)
    y = np.zeros((4, 2), np.float32)
    add_rows.specialize(n=4)(np.ones((4, 2), np.float32), y)
    assert y.sum() == 8


# -- the native entry (`compile.lang.trampoline`) ----------------------------------------------
@pytest.fixture
def release(monkeypatch):
    """Release builds whatever the environment says (a debug build has no native entry)."""
    monkeypatch.delenv("CUVIL_KERNEL_DEBUG", raising=False)


def _entry(k):
    """The kernel's release-build entry (a debug build's callable is a Python wrapper: it has
    no native entry)."""
    (entry,) = [e for e in k._entries.values() if e.spec.error_record is None]
    assert entry.native is not _no_native, "the native entry was not built"
    return entry


def test_the_native_entry_runs_plain_calls_and_declines_everything_else(release):
    x, y = _fresh()
    axpy(x, y, 1.0, 5)
    native = _entry(axpy).native
    y2, want = np.ones_like(y), np.ones_like(y)
    assert native(x, y2, 0.5, 5) is None
    axpy.py_func(x, want, 0.5, 5)
    assert np.array_equal(y2, want)
    declined = {name: make(*_fresh()) for name, make in BAD_CALLS.items()}
    declined.update({                         # valid, but for the Python entry to convert
        "a numpy scalar": (x, y, np.float32(2), 5), "a bool for i64": (x, y, 1.0, True),
        "an int beyond int64 for f32": (x, y, 1 << 70, 5),
        "an ndarray subclass": (x.view(_Sub), y, 1.0, 5)})
    if axpy._entries and _entry(axpy)._written is None:  # (not yet known: kept writeable)
        declined["a read-only input"] = (_read_only(x), y, 1.0, 5)
    for name, args in declined.items():
        before = y.copy()
        assert native(*args) is MISS, name
        assert np.array_equal(y, before), name
    y3, want = np.ones_like(y), np.ones_like(y)
    assert native(x, y3, 2, 5) is None        # an int for f32: converted as float(2) is
    axpy.py_func(x, want, 2.0, 5)
    assert np.array_equal(y3, want)


def test_the_native_entry_takes_read_only_arrays_the_kernel_only_reads_once_known(release):
    x, y = _fresh()
    axpy(x, y, 1.0, 5)
    entry = _entry(axpy)
    axpy(_read_only(x), np.ones_like(y), 1.0, 5)  # through the Python entry: learns `written`
    assert entry.written() == {"y"}
    assert entry.native(_read_only(x), np.ones_like(y), 1.0, 5) is None
    assert entry.native(x, _read_only(y), 1.0, 5) is MISS  # the kernel writes y
    with pytest.raises(ValueError, match="read-only"):
        axpy(x, _read_only(y), 1.0, 5)


class _Sub(np.ndarray):
    pass


def test_the_native_entry_returns_what_the_kernel_returns(release):
    x = np.arange(7, dtype=np.float64)
    total(x, 7)
    assert _entry(total).native(x, 7) == 21.0 and _entry(total).native(x[:3].copy(), 3) == 3.0
    assert counted(np.array([1, -2, 3], np.int32), 3) == 2
    assert _entry(counted).native(np.array([1, -2, 3, 4], np.int32), 4) == 3


@kernel(name="dispatch.counted")
def counted(x: Buf[i32, "n"], n: i64) -> i32:
    c: i32 = 0
    for i in range(n):
        if x[i] > 0:
            c += 1
    return c


@kernel(name="dispatch.spin")
def spin(out: Buf[f64, 1], n: i64):
    s = 0.0
    for i in range(n):
        s = s * 1.0000001 + 0.5              # a dependency chain: n steps, not vectorised
    out[0] = s


def test_the_native_entry_releases_the_gil_while_the_kernel_runs(release):
    """Another Python thread stamps the time between short sleeps; it can only wake while the
    kernel runs if the call released the GIL (holding it, as ``PYFUNCTYPE`` does, leaves no
    stamp in the middle half of the call)."""
    out = np.zeros(1, np.float64)
    spin(out, 10)                             # builds the entry
    _entry(spin)
    stamps, stop = [], threading.Event()

    def stamp():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.0005)

    worker = threading.Thread(target=stamp)
    worker.start()
    try:
        n = 1_000
        while True:                           # a call long enough for the thread to wake
            t0 = time.perf_counter()
            spin(out, n)
            t1 = time.perf_counter()
            if t1 - t0 > 0.05 or n > 1 << 34:
                break
            n *= 4
    finally:
        stop.set()
        worker.join()
    quarter = (t1 - t0) / 4
    assert any(t0 + quarter < s < t1 - quarter for s in stamps)


def test_threads_calling_one_kernel_at_once_get_their_own_results():
    axpy(*_fresh(), 1.0, 5)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(200):
            x = rng.standard_normal((5, 2)).astype(np.float32)
            y, want = np.ones((5, 2), np.float32), np.ones((5, 2), np.float32)
            a = float(rng.integers(1, 5))
            axpy(x, y, a, 5)
            axpy.py_func(x, want, a, 5)
            if not np.array_equal(y, want):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
