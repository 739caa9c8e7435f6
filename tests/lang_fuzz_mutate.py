"""Mutants of the fuzzer's programs, for the compiler's error paths: each seed's program with a
few random textual edits inside the kernel (a cast swapped, an operator or a literal changed,
a name replaced by another, a lane count or an index bumped) that often make it invalid. The
compiler must then raise `KernelSourceError` naming the kernel's file and line, or compile;
anything else (an internal exception, an error without a location) is a ``compile-crash`` or
``unlocated-error``. Mutants that compile are not run: their values may be out of range.
Not inserted: casts, ``**`` and ``<<`` of constants too large for their type (a known defect:
an OverflowError while folding them)."""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import numpy as np

from lang_fuzz_check import Failure, load
from lang_fuzz_prog import Flags, generate

EDITS = [
    (r"\bi32\(", ["f32(", "i64(", "boolean(", "f64(", "abs(", "(", "simd.splat("]),
    (r"\bf32\(", ["i32(", "f64(", "(", "kmath.sqrt("]),
    (r"\bi64\(", ["i32(", "f32(", "int(", "(", "len("]),
    (r"\bf64\(", ["float(", "f32(", "i64(", "("]),
    (r" [-+*] ", [" / ", " // ", " % ", " ** ", " << ", " & ", " and ", " < "]),
    (r" (?:<|>|<=|>=|==|!=) ", [" + ", " is ", " in "]),
    (r"\b\d+\b", ["0", "-1", "2**40", "1.5", "None", "(1, 2)", "True", "300", "-7"]),
    (r"\bsimd\.(?:load|splat|iota)\b", ["simd.store", "simd.select", "simd.reduce_add",
                                       "simd.vector"]),
    (r"\bsimd\.(?:min|max|select)\b", ["min", "max", "select", "simd.shuffle"]),
    (r"\bkmath\.\w+", ["kmath.sqrt", "kmath.exp", "kmath.ctz", "kmath.fma", "kmath.isnan",
                       "kmath.nope"]),
    (r"\bb_\d\b", ["b_0", "b_1", "t_0", "a_0", "c_tup", "TAB", "c_0", "s_0"]),
    (r"\bv_\d+\b", ["b_0", "r_3", "c_tup", "TAB", "v_1", "s_0", "c_flag"]),
    (r"\b[tsr]_\d+\b", ["b_0", "TAB", "c_1", "c_flag", "1.5", "True", "t_0", "r_2", "s_1"]),
    (r"\bsimd\.\w+\(", ["simd.load(", "simd.copy(", "simd.fill(", "simd.shuffle(",
                         "simd.insert(", "simd.any(", "simd.stream_store(", "simd.iota("]),
    (r"\b(?:abs|min|max|select|len)\(", ["abs(", "min(", "max(", "select(", "len(",
                                         "boolean(", "kmath.isnan("]),
    (r"\[", ["[1, ", "[-1 + ", "[:, ", "[0:2, "]),
    (r"\bbreak\b|\bcontinue\b", ["return", "pass", "break"]),
    (r"\brange\(", ["unroll(", "bits(", "range(1, ", "len(", "prange("]),
    (r"\bprange\(", ["range(", "prange(1, ", "unroll(", "prange(-5, "]),
    (r"chunks=\d+", ["chunks=0", "chunks=c_1", "chunks=5000", "step=2"]),
    (r":\n", [":\n        return\n", ":\n    x = 1\n"]),
]


#: statements a mutant gets inserted at a random line of the kernel (most are invalid)
INSERTS = [
    "simd.load(b_0, 0)", "kmath.sqrt()", "t_9 = local(f32, 0)", "t_9 = local(f32, 5000)",
    "r_9 = simd.splat(f32(1.0), 0)", "r_9 = simd.splat(f32(1.0), 300)", "for i_9 in range(): pass",
    "for i_9 in range(1, 5, 0): pass", "for i_9 in unroll(-1): pass", "r_9: Vec[f32, 0] = 1.0",
    "b_0[1.5] = 0", "b_0[True] = 0", "b_0 = 1", "del v_1", "print(1)", "x_9 = lambda: 1",
    "x_9 = [1, 2]", "x_9 = {1: 2}", "x_9 = 'a'", "x_9 = f'{1}'", "b_0[0] = None", "return 1",
    "return", "yield 1", "x_9 = b_0", "x_9 = simd", "x_9 = kmath.sqrt", "x_9 = c_tup[5]",
    "x_9 = c_tup[c_0]", "x_9 = TAB[-1] + TAB[1:3][0]", "x_9 = b_0.shape[7]", "x_9 = len(c_tup)",
    "x_9 = b_0[0, 0, 0, 0, 0]", "x_9 = b_0[:]", "x_9, y_9 = 1", "x_9, y_9 = b_0[0:3]",
    "x_9 = simd.shuffle(simd.iota(i32, 4), (4,))", "x_9 = simd.slice(simd.iota(i32, 4), 3, 2)",
    "x_9 = simd.iota(i32, 4)[4]", "x_9 = simd.vector(i32, (2**40,))", 
    "x_9: i32 = 2**40", "x_9 = 1.0 // 0.0", "x_9 = 1 // 0",
    "x_9 = 1 % 0", "x_9 = -(2**63) // -1", "x_9 = i64(float('nan'))",
    "x_9 = abs(-2**63)", "x_9 = min()", "x_9 = max(1)", "x_9 = select(True, 1)",
    "x_9 = view(address(b_0), f32)", "x_9 = address(c_0)", "x_9 = bits(1.5)",
    "x_9 = kmath.ctz(1.5)", "x_9 = kmath.popcount(simd.iota(i32, 4))", "x_9 = 1 if True else 2.5",
    "x_9 = (1, 2) + (3,)", "x_9 = not simd.iota(i32, 4)", "x_9 = simd.any(1)", "x_9 = c_1 << 1",
    "x_9 = [i for i in range(3)]", "x_9 = b_0[0] @ b_0[0]", "x_9 = 1 < 2 < 3 < b_0[0]",
    "while True: pass", "assert c_0", "with c_0: pass", "try: pass\n    except: pass",
    "global TAB", "x_9 = fz(b_0)", "x_9 = unroll(3)", "for x_9, y_9 in TAB: pass",
    "for x_9 in b_0: pass", "for x_9 in range(3.5): pass", "for x_9 in bits(c_tup): pass",
    "x_9 = simd.load(b_0, -1, 4)", "simd.store(b_0, 0, 1.0)", "simd.fill(b_0, 0, 0, 1)",
    "simd.copy(b_0, 0, b_0, 1, 300)", "x_9 = simd.reduce_add(1.0)", "x_9 = Vec[f32, 4]",
    "x_9 = prange(3)", "for x_9 in prange(): pass", "for x_9, y_9 in prange(3): pass",
    "for x_9 in prange(3):\n        return", "for x_9 in prange(3):\n        break",
    "for x_9 in prange(3):\n        b_0 = 1", "atomic_add(b_0, 0, 1)", "atomic_min(b_0, 0, 1.5)",
    "atomic_max(c_0, 0, 1)", "atomic_add(b_0, (0, 0, 0, 0), 1)", "x_9 = atomic_add(b_0, 0, 1)",
    "atomic_add(b_0, 0)",
]


def insert(source: str, rng) -> str:
    """``source`` with one of `INSERTS` at a random statement line of ``fz``."""
    lines = source.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("def fz"))
    spots = [k for k in range(start + 1, len(lines)) if lines[k].startswith("    ")
             and not lines[k].rstrip().endswith(":") and not lines[k - 1].rstrip().endswith(":")]
    if not spots:
        return source
    k = spots[int(rng.integers(len(spots)))]
    indent = lines[k][:len(lines[k]) - len(lines[k].lstrip())]
    stmt = INSERTS[int(rng.integers(len(INSERTS)))].replace("\n    ", "\n" + indent)
    return "\n".join(lines[:k] + [indent + stmt] + lines[k:]) + "\n"


def mutate(source: str, rng) -> str:
    """``source`` with one to three edits inside ``def fz`` (helpers' text too)."""
    head, sep, body = source.partition("\n\n\n@inline") if "@inline" in source else \
        source.partition("\n\n\ndef fz")
    for _ in range(int(rng.integers(1, 4))):
        pattern, options = EDITS[int(rng.integers(len(EDITS)))]
        spots = [m for m in re.finditer(pattern, body)
                 if "K = kernel" not in body[max(0, m.start() - 40):m.end()]]
        if spots:
            m = spots[int(rng.integers(len(spots)))]
            new = options[int(rng.integers(len(options)))]
            body = body[:m.start()] + new + body[m.end():]
    return head + sep + body


def check_mutant(seed: int, flags: Flags | None, workdir) -> list:
    from cuvil_perception.compile import get_kernel
    from cuvil_perception.errors import KernelSourceError
    prog = generate(seed, flags)
    rng = np.random.default_rng(seed + 99)
    prog.source = mutate(prog.source, rng) if rng.random() < 0.5 else insert(prog.source, rng)
    try:
        module = load(prog, workdir)
    except Exception:
        return []  # not Python, or fails at import: not the compiler's input
    try:
        get_kernel(module.K.spec(**prog.static))
    except KernelSourceError as exc:
        where = str(Path(workdir).resolve() / f"fuzz_s{seed}.py")
        if where not in str(exc) and f"fuzz_s{seed}.py" not in str(exc):
            return [Failure(seed, "unlocated-error", f"{exc}"[:1500])]
    except RecursionError:
        return [Failure(seed, "compile-crash", "RecursionError")]
    except Exception:
        return [Failure(seed, "compile-crash", traceback.format_exc()[-2500:])]
    return []
