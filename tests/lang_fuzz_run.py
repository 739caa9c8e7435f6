"""Differential fuzzing campaigns of the kernel language: compiled vs ``py_func`` on random
programs (`lang_fuzz_prog`), checked by `lang_fuzz_check`.

    PYTHONPATH=. nice -n 19 python tests/lang_fuzz_run.py --seeds 0:1000 [--jobs 2]
        [--timeout 60] [--flag effects_in_expr=1] [--show]

Seeds run in worker processes (one import each); a worker that stops answering within
``--timeout`` seconds is killed and its seed reported as ``hang``, one that dies as
``native-crash`` (a segfault in the compiled code or LLVM); the campaign goes on from the next
seed. Prints one line per failure and a count per kind; ``--show`` prints each failing
program's source. A seed reproduces its program and inputs exactly:
``python tests/lang_fuzz_run.py --seeds 123:124 --show``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import fields
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lang_fuzz_prog import Flags  # noqa: E402


def parse_flags(items: list) -> Flags:
    """``name=value`` items as `Flags` (bools as 0/1, floats as numbers)."""
    flags = Flags()
    types = {f.name: f.type for f in fields(Flags)}
    for item in items:
        name, _, value = item.partition("=")
        if name not in types:
            raise SystemExit(f"unknown flag {name!r}; flags: {sorted(types)}")
        setattr(flags, name, float(value) if "float" in str(types[name]) else bool(int(value)))
    return flags


def worker(seeds: list, flags: Flags, mutants: bool = False) -> None:
    """Check each seed; print ``S <seed>`` before and ``R <json list of failures>`` after."""
    from lang_fuzz_check import check
    from lang_fuzz_mutate import check_mutant
    with tempfile.TemporaryDirectory(prefix="lang-fuzz-") as work:
        for seed in seeds:
            print(f"S {seed}", flush=True)
            found = (check_mutant if mutants else check)(seed, flags, work)
            print("R " + json.dumps([f.as_dict() for f in found]), flush=True)


def _spawn(seeds: list, flag_items: list) -> subprocess.Popen:
    env = dict(os.environ, CUVIL_NO_DISK_CACHE="1",
               PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE),
                                           os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker",
           ",".join(map(str, seeds))] + [a for f in flag_items for a in ("--flag", f)]
    if "--mutants" in sys.argv:
        cmd.append("--mutants")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            text=True, bufsize=1)


def run(seeds: list, flag_items: list = (), timeout: float = 60.0, log=None) -> list:
    """Failures (dicts: seed, kind, detail) of ``seeds``, in one worker at a time; ``log``
    (a file) gets a line per seed done and per failure as they come."""
    failures, pending = [], list(seeds)
    while pending:  # a fresh worker every 200 seeds: compiled kernels stay in memory
        proc, current, before = _spawn(pending[:200], list(flag_items)), None, len(pending)
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            line = proc.stdout.readline() if ready else None
            if line is None or line == "":
                if line is None:
                    proc.kill()
                proc.wait()
                if current is None and len(pending) == before:
                    raise RuntimeError(f"the fuzz worker exited with {proc.returncode} "
                                       f"before its first seed")
                if current is not None:
                    kind = "hang" if line is None else f"native-crash (rc {proc.returncode})"
                    failures.append({"seed": current, "kind": kind, "detail": ""})
                    if log is not None:
                        print(f"done {current}\n  {kind}", file=log, flush=True)
                    pending = pending[pending.index(current) + 1:]
                break
            if line.startswith("S "):
                current = int(line[2:])
            elif line.startswith("R "):
                found = json.loads(line[2:])
                failures += found
                if log is not None:
                    print(f"done {current}" + "".join(f"\n  {f['kind']}: {f['detail'][-300:]}"
                                                      for f in found), file=log, flush=True)
                pending = pending[pending.index(current) + 1:]
                current = None
        proc.stdout.close()
    return failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0:100", help="start:stop")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--flag", action="append", default=[], help="name=value (Flags)")
    ap.add_argument("--show", action="store_true", help="print each failing program")
    ap.add_argument("--progress", action="store_true", help="a line per seed on stderr")
    ap.add_argument("--mutants", action="store_true",
                    help="compile mutants of each program: error paths (lang_fuzz_mutate)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        worker([int(s) for s in args.worker.split(",")], parse_flags(args.flag), args.mutants)
        return 0
    start, stop = map(int, args.seeds.split(":"))
    failures = campaign(list(range(start, stop)), args.flag, args.timeout, args.jobs,
                        sys.stderr if args.progress else None)
    for f in failures:
        print(f"seed {f['seed']}: {f['kind']}: {f['detail'][-600:]}")
        if args.show:
            from lang_fuzz_prog import generate
            print(generate(f["seed"], parse_flags(args.flag)).source)
    counts = Counter(f["kind"].split(" (")[0] for f in failures)
    print(f"{stop - start} seeds, {len(failures)} failures: {dict(counts)}")
    return 1 if failures else 0


def campaign(seeds: list, flag_items: list, timeout: float, jobs: int, log=None) -> list:
    """`run` over ``jobs`` interleaved shares of ``seeds`` in parallel threads."""
    if jobs <= 1:
        return run(seeds, flag_items, timeout, log)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(jobs) as pool:
        parts = pool.map(lambda k: run(seeds[k::jobs], flag_items, timeout, log), range(jobs))
    return sorted((f for part in parts for f in part), key=lambda f: f["seed"])


if __name__ == "__main__":
    sys.exit(main())
