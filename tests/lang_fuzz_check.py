"""Run one fuzzer program both ways and classify what differs.

``check(seed, flags, workdir)`` writes the seed's program to ``workdir/fuzz_s<seed>.py``
(so ``inspect.getsource`` works), imports it, runs ``K.py_func`` (the oracle) and the compiled
``K`` on copies of the same inputs, and, for programs with a debug probe, the bounds-checked
``KD`` with the probe off (must equal the oracle, raise nothing) and on (must raise
`KernelIndexError` naming the probed buffer). Returns a list of `Failure` (empty: agreed).

Failure kinds: ``mismatch`` (a buffer or the result differs), ``compile-crash`` (compiling
raised something other than `KernelSourceError`), ``rejected`` (a `KernelSourceError` on a
program the generator believes valid: read it), ``run-crash`` (the compiled call raised),
``debug-false-positive``, ``debug-false-negative``, ``debug-mismatch``, ``oracle-error``
(``py_func`` raised: a generator bug), ``generator-error``. Hangs and native crashes are
found by the process running this (`lang_fuzz_run`).
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lang_fuzz_prog import Flags, generate, inputs

#: relative, absolute tolerance of the outputs written through inexact math functions
TOLERANCE = {np.dtype("float32"): (2e-5, 2e-5), np.dtype("float64"): (1e-12, 1e-12)}


@dataclass
class Failure:
    seed: int
    kind: str
    detail: str

    def as_dict(self) -> dict:
        return asdict(self)


def load(prog, workdir: Path):
    path = Path(workdir) / f"fuzz_s{prog.seed}.py"
    path.write_text(prog.source)
    name = f"fuzz_s{prog.seed}_{id(prog)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def oracle(module, prog, args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return module.K.py_func(*args, **prog.static)


def check(seed: int, flags: Flags | None = None, workdir: Path | str = ".") -> list:
    try:
        prog = generate(seed, flags)
        module = load(prog, workdir)
    except Exception:
        return [Failure(seed, "generator-error", traceback.format_exc()[-2000:])]
    native, py = inputs(prog)
    try:
        want = oracle(module, prog, py)
    except Exception as exc:
        return [Failure(seed, "oracle-error", _short(exc))]
    failures = compiled(module, prog, native, py, want)
    if prog.poke is not None and not failures:
        failures += debug_build(module, prog, py, want)
    if not failures:
        failures += respecialised(module, prog)
    return failures


def respecialised(module, prog) -> list:
    """Other static values, then another module-level ``TAB``: each compiles (or loads) its
    own kernel, never the one built for the old values."""
    prog.static = dict(prog.static, c_0=prog.static["c_0"] + 3,
                       c_tup=tuple(x - 1 for x in prog.static["c_tup"]),
                       c_flag=not prog.static["c_flag"])
    found = rerun(module, prog, "static")
    if not found:
        module.TAB = (5, 0, -2, 7)
        found = rerun(module, prog, "module-constant")
    return found


def rerun(module, prog, what: str) -> list:
    native, py = inputs(prog)
    try:
        want = oracle(module, prog, py)
    except Exception:
        return []  # the new values make the oracle fail: not the compiler's business
    return [Failure(prog.seed, f"{f.kind} ({what} changed)", f.detail)
            for f in compiled(module, prog, native, py, want)]


def compiled(module, prog, native, py, want) -> list:
    from cuvil_perception.compile import get_kernel
    from cuvil_perception.compile.lang import threads
    from cuvil_perception.errors import KernelSourceError
    seed = prog.seed
    try:
        get_kernel(module.K.spec(**prog.static))
    except KernelSourceError as exc:
        return [Failure(seed, "rejected", _short(exc))]
    except Exception:
        return [Failure(seed, "compile-crash", traceback.format_exc()[-3000:])]
    try:
        with threads(3):  # prange loops on the pool (two helpers), whatever the CPU count
            got = module.K(*native, **prog.static)
    except Exception as exc:
        return [Failure(seed, "run-crash", _short(exc))]
    diffs = compare(prog, native, py, got, want)
    return [Failure(seed, "mismatch", "; ".join(diffs))] if diffs else []


def debug_build(module, prog, py_inputs, want) -> list:
    from cuvil_perception.errors import KernelIndexError
    seed, failures = prog.seed, []
    native, _ = inputs(prog)
    try:
        got = module.KD(*native, **prog.static)
    except KernelIndexError as exc:
        return [Failure(seed, "debug-false-positive", _short(exc))]
    except Exception as exc:
        return [Failure(seed, "debug-crash", _short(exc))]
    diffs = compare(prog, native, py_inputs, got, want)
    if diffs:
        failures.append(Failure(seed, "debug-mismatch", "; ".join(diffs)))
    native, _ = inputs(prog)
    native[[n for n, _, _ in prog.runtime].index("s_99")] = 1
    name, axis = prog.poke
    try:
        module.KD(*native, **prog.static)
        failures.append(Failure(seed, "debug-false-negative", f"no error for {name} axis {axis}"))
    except KernelIndexError as exc:
        if f"'{name}" not in str(exc) or (axis is not None and f"axis {axis}" not in str(exc)):
            failures.append(Failure(seed, "debug-wrong-error", _short(exc)))
    except Exception as exc:
        failures.append(Failure(seed, "debug-crash", _short(exc)))
    return failures


def compare(prog, native, py, got, want) -> list:
    diffs = []
    for (name, kind, b), g, w in zip(prog.runtime, native, py):
        if kind != "buf":
            continue
        bad = differs(np.asarray(g), np.asarray(w), b.approx)
        if bad is not None:
            diffs.append(f"{name}{list(bad)}: compiled {g[bad]!r} py_func {w[bad]!r}")
    if prog.ret is not None:
        ty = np.dtype({"i32": "i4", "i64": "i8", "f32": "f4", "f64": "f8"}[prog.ret])
        g, w = np.asarray([got], ty), np.asarray([want]).astype(ty)
        if differs(g, w, False) is not None:
            diffs.append(f"return: compiled {got!r} py_func {want!r}")
    return diffs


def differs(g: np.ndarray, w: np.ndarray, approx: bool):
    """The first index where ``g`` and ``w`` differ (floats: NaN equals NaN, zeros' signs
    count; ``approx``: within `TOLERANCE`), or None."""
    if g.dtype.kind != "f":
        bad = np.argwhere(g != w)
    elif approx:
        rtol, atol = TOLERANCE[g.dtype]
        with np.errstate(all="ignore"):
            close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True) | (g == w)
        bad = np.argwhere(~close)
    else:
        same = (g == w) & (np.signbit(g) == np.signbit(w)) | (np.isnan(g) & np.isnan(w))
        bad = np.argwhere(~same)
    return tuple(int(x) for x in bad[0]) if len(bad) else None
