"""Differential fuzzing of the kernel language: random well-typed kernels (`lang_fuzz_prog`:
every scalar and buffer type, locals, casts, Python-semantics arithmetic, if/elif/else, range
loops with negative steps, while, bits, unroll, break/continue, early return, ``@inline``
helpers that write buffers, local arrays, slices, tuple stores, vector values, prange loops
reducing into a scalar, run on 3 threads) compiled and run against ``kernel.py_func`` on the
same inputs, a quarter of them also bounds-checked
(no false alarm in range, `KernelIndexError` one past the end). A fixed seed range, bounded
to about 20 s on one core; a seed reproduces its program and inputs:
``python tests/lang_fuzz_run.py --seeds 17:18 --show`` prints it.

What the generator leaves out, and where it is tested instead (tests/lang_fuzz_prog.py
`Flags`; each was a defect the fuzzer or an audit found, now fixed or documented):

- ``wide_constants`` off, int literals within +-12345: a compile-time int beyond i32 beside
  an i32 operand is a compile error, which a well-typed program does not hold
  (test_lang_fuzz_findings);
- no arithmetic on comparison results: a documented difference (numpy's bools uncompiled);
- never written: casts of tuples and constant float -> int casts, ``**`` / ``<<`` of large
  constants (test_lang_constants, test_lang_fuzz_findings), ``None`` slice bounds
  (test_lang_slice_order), ``simd`` splat / select / min / max of raw narrow-int loads
  (test_lang_twins).

The error paths have their own campaign: ``lang_fuzz_run.py --mutants`` compiles edited
programs and wants a `KernelSourceError` at a line or a kernel, never an internal error.
"""

from __future__ import annotations

from lang_fuzz_run import run

SEEDS = range(0, 100)  # about 12 s on one core: keep the range small (the suite's budget)


def test_compiled_kernels_equal_py_func_on_random_programs():
    failures = run(list(SEEDS), timeout=60.0)
    report = "\n".join(f"seed {f['seed']}: {f['kind']}: {f['detail'][-800:]}\n"
                       f"{_source(f['seed'])}" for f in failures)
    assert not failures, report


def _source(seed: int) -> str:
    from lang_fuzz_prog import generate
    return generate(seed).source
