"""Kernel calls replayed on another target (tests/native/calls_harness.c): each call's arguments
are written as files, the harness runs them under qemu-user, and the host kernel is called on the
same bytes (copies of the same buffers, in the same state) to compare with.

A call's arguments, in the kernel's order: a numpy array (a read-only input, written for this
call), ``Const(array)`` (a read-only input many calls share, such as weights: written once),
``Out(array)`` (a buffer in its state before the call, compared after it), ``Table([arrays])``
(a uint64 table of buffer addresses), ``np.int64`` / ``np.float32`` / ``np.float64`` scalars.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cuvil_perception.compile import KernelSpec, get_kernel


@dataclass
class Out:
    """A buffer the kernel writes: compared bitwise unless ``tol`` = (rtol, atol) is given
    (float buffers; then the atol is absolute, as the kernel's own equivalence test states it)."""
    array: np.ndarray
    tol: tuple[float, float] | None = None


@dataclass
class Const:
    """A read-only input that stays the same for every call (written once, by identity)."""
    array: np.ndarray


@dataclass
class Table:
    """A uint64 table of the addresses of ``parts`` (read-only inputs)."""
    parts: list


@dataclass
class Call:
    spec: KernelSpec
    args: list
    label: str  # for messages: which frame or image


@dataclass
class _Written:
    """One argument as written for the harness: its files (dtype, shape each), or a scalar."""
    kind: str  # r, w, t or a scalar's i / f / d
    files: list  # [(name, dtype, shape)]
    value: object = None
    tol: tuple[float, float] | None = None


class Replay:
    """Calls written into ``folder`` as one manifest for the harness. Only the files are kept
    (the host's calls read them back), so a long replay does not hold its buffers in memory."""

    def __init__(self, folder: Path):
        self.folder, self.calls, self.lines = folder, [], []
        self._shared: dict[int, tuple] = {}  # id -> (array kept alive: ids stay unique, file)

    def add(self, call: Call) -> None:
        n = len(self.calls)
        written = [self._write(arg, f"c{n}_a{k}") for k, arg in enumerate(call.args)]
        tokens = [call.spec.name.replace(".", "_"), str(self.folder)]
        for arg in written:
            files = ",".join(name for name, _, _ in arg.files)
            tokens.append(f"{arg.kind}:{files or arg.value}")
        self.calls.append(Call(call.spec, written, call.label))
        self.lines.append(" ".join(tokens))

    def _file(self, array: np.ndarray, stem: str) -> tuple:
        np.ascontiguousarray(array).tofile(self.folder / f"{stem}.bin")
        return (f"{stem}.bin", array.dtype, array.shape)

    def _write(self, arg, stem: str) -> _Written:
        if isinstance(arg, Out):
            return _Written("w", [self._file(arg.array, stem)], tol=arg.tol)
        if isinstance(arg, Table):
            return _Written("t", [self._file(p, f"{stem}_{j}") for j, p in enumerate(arg.parts)])
        if isinstance(arg, Const):
            if id(arg.array) not in self._shared:
                self._shared[id(arg.array)] = (arg.array, self._file(arg.array, stem))
            return _Written("r", [self._shared[id(arg.array)][1]])
        if isinstance(arg, np.ndarray):
            return _Written("r", [self._file(arg, stem)])
        if isinstance(arg, np.int64):
            return _Written("i", [], int(arg))
        if isinstance(arg, (np.float32, np.float64)):
            kind = "f" if isinstance(arg, np.float32) else "d"
            return _Written(kind, [], float(arg).hex())
        raise TypeError(f"unsupported argument {type(arg).__name__}")

    def read(self, name: str, dtype, shape) -> np.ndarray:
        return np.fromfile(self.folder / name, dtype).reshape(shape)

    def run(self, emulator: list, exe: Path) -> list[int]:
        """Run every call under ``emulator``; the return value of each."""
        manifest = self.folder / "calls.txt"
        manifest.write_text("\n".join(self.lines) + "\n")
        done = subprocess.run([*emulator, str(exe), str(manifest)], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        returns = [int(line.split()[1]) for line in done.stdout.splitlines()]
        assert len(returns) == len(self.calls), done.stdout
        return returns


def host_call(call: Call) -> tuple[int, list]:
    """The host kernel on the arguments of ``call`` (given as for `Replay.add`, or as written
    by it: then read back from ``replay``'s files): (return value, the Out buffers after the
    call)."""
    return _host_call(call, None)


def _host_call(call: Call, replay: Replay | None) -> tuple[int, list]:
    keep, values, outs = [], [], []

    def load(arg, j=0):
        name, dtype, shape = arg.files[j]
        return replay.read(name, dtype, shape)

    for arg in call.args:
        if replay is not None and arg.kind in "rwt":
            arrays = [load(arg, j) for j in range(len(arg.files))]
            arg = Table(arrays) if arg.kind == "t" else \
                Out(arrays[0]) if arg.kind == "w" else arrays[0]
        elif replay is not None:
            arg = np.int64(arg.value) if arg.kind == "i" else float.fromhex(arg.value)
        if isinstance(arg, Out):
            copy = arg.array.copy()
            outs.append(copy)
            keep.append(copy)
            values.append(copy.ctypes.data)
        elif isinstance(arg, Table):
            parts = [np.ascontiguousarray(p) for p in arg.parts]
            table = np.array([p.ctypes.data for p in parts], np.uint64)
            keep += [*parts, table]
            values.append(table.ctypes.data)
        elif isinstance(arg, (Const, np.ndarray)):
            array = np.ascontiguousarray(arg.array if isinstance(arg, Const) else arg)
            keep.append(array)
            values.append(array.ctypes.data)
        else:
            values.append(arg if isinstance(arg, float) else arg.item())
    returned = get_kernel(call.spec)(*values)
    return (0 if returned is None else int(returned)), outs


def assert_same(replay: Replay, returns: list[int]) -> None:
    """Every replayed call against the host kernel on the same files: the return value exact,
    each Out buffer bitwise or within its tolerance."""
    for call, got_return in zip(replay.calls, returns):
        where = f"{call.spec.name} on {call.label}"
        want_return, wants = _host_call(call, replay)
        assert got_return == want_return, f"{where}: returned {got_return}, host {want_return}"
        outs = [(k, a) for k, a in enumerate(call.args) if a.kind == "w"]
        for (k, out), want in zip(outs, wants):
            name, dtype, shape = out.files[0]
            got = replay.read(name + ".out", dtype, shape)
            if out.tol is None:
                assert got.tobytes() == want.tobytes(), f"{where}: argument {k} differs"
            else:
                np.testing.assert_allclose(got, want, rtol=out.tol[0], atol=out.tol[1],
                                           err_msg=f"{where}: argument {k}")
