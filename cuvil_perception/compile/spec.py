"""`KernelSpec`: what a native kernel is, and the identity it is memoised and cached under.

A kernel is declared by a name, an IR-building function and its static parameters. The spec itself
holds no IR and no machine code; rendering, compiling and loading are separate steps
(`render_ir.py` -> `codegen.py` -> `loader.py`) that `registry.get_kernel` chains together.
"""

from __future__ import annotations

import ctypes
import json
import re
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Mapping

from ..errors import CompileError

#: ctypes type of every argument/return kind a kernel may use. "ptr" is passed as an int address
#: (``arr.ctypes.data``): c_void_p costs ~0.4 us per call against 4-9 us for ``arr.ctypes.data_as``.
CTYPES = {
    "ptr": ctypes.c_void_p,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
}

#: LLVM fast-math flags a kernel may declare (llvmlite spelling).
FASTMATH_FLAGS = frozenset({"fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"})

_SYMBOL_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: element types a pointer argument may point to (numpy spelling of the same name: ``np.<x>``
#: with f -> float, u -> uint, i -> int).
ELEMENT_TYPES = ("f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")

#: what a kernel does with an argument (the C header makes ``in`` pointers ``const``).
ROLES = ("in", "out", "inout", "state", "scratch")


@dataclass(frozen=True)
class Arg:
    """One documented kernel argument (the C header of a library is generated from these; a
    ``@kernel`` writes them from its annotations and role markers: `lang.signature`).

    ``kind`` is the ABI kind (a key of `CTYPES`); ``dtype`` the element type a ``ptr`` points to
    (one of `ELEMENT_TYPES`; None for scalars); ``shape`` the dims of the buffer, outermost first:
    an int, or an expression over the kernel's static params and its scalar arguments, e.g.
    ``"max_pillars * max_points + 4"`` or ``"count"`` (a dim naming a scalar argument means "at
    least that many rows"). ``unit`` says what the values measure (``"m"``, ``"cells"``);
    ``role`` is one of `ROLES` (``state``: kept between calls, ``scratch``: any content).
    ``most``: for a scalar, the largest value the kernel accepts (an int or an expression over
    the static params, e.g. ``"pre"``); a library's C entry point returns its range error above
    it (every size scalar is also checked to be >= 0 there).
    """

    name: str
    kind: str
    dtype: str | None = None
    shape: tuple = ()
    unit: str = ""
    role: str = "in"
    doc: str = ""
    most: str | int | None = None

    def check(self, kernel: str) -> None:
        """Raise `CompileError` naming ``kernel`` when the declaration is inconsistent."""
        where = f"kernel {kernel}: argument {self.name!r}"
        if not isinstance(self.name, str) or not _IDENTIFIER.fullmatch(self.name):
            raise CompileError(f"{where}: name must be a C identifier")
        if self.kind not in CTYPES:
            raise CompileError(f"{where}: unknown kind {self.kind!r}; use one of {sorted(CTYPES)}")
        if (self.kind == "ptr") != (self.dtype is not None):
            raise CompileError(f"{where}: a dtype is given for pointers and only for pointers")
        if self.dtype is not None and self.dtype not in ELEMENT_TYPES:
            raise CompileError(f"{where}: unknown dtype {self.dtype!r}; use one of "
                               f"{', '.join(ELEMENT_TYPES)}")
        if self.role not in ROLES:
            raise CompileError(f"{where}: unknown role {self.role!r}; use one of {ROLES}")


@dataclass(frozen=True, eq=False)
class KernelSpec:
    """Declaration of one native kernel.

    ``build(module, fn_name, **static)`` must define exactly one function named ``fn_name`` in the
    llvmlite ``ir.Module`` it is given, with the signature ``ret fn_name(*args)``. ``static`` values
    are JSON-serialisable and are baked into the IR as constants (shapes, strides, thresholds).
    ``fastmath`` lists the fp flags the generator puts on the kernel's own instructions (part of
    the identity); shared helpers declare the flags they add (`irutil.vexp`, behind kmath's f32
    ``exp``/``sigmoid``: ``contract``), and rendering checks that every flag in the IR is in that
    union, else `FastMathError` (`fastmath.check`): pillars.decode and yolo.decode declare none
    and carry ``contract`` from the exp polynomial only. Bump
    ``version`` whenever the generator's output changes. ``source`` is a
    digest of the source text the generator compiles (kernel-language kernels: the kernel's
    module and its helpers), so editing a kernel outside this package changes the identity too.

    ``error_record`` marks a bounds-checked (debug) build: the kernel's last argument is a
    hidden int64[4] error record (``[site + 1, index, extent, 0]``, all zero when nothing went
    wrong) and ``error_record(spec, record)`` returns the exception for a non-zero one. Callers
    never pass the record: the callable `get_kernel` returns takes ``call_args`` and supplies,
    checks and raises it itself (`loader`). Not part of the identity: the static param
    ``_debug`` (which the generator reads to add the argument) is.

    ``threads`` marks a kernel with ``prange`` loops: its last argument before a debug build's
    record is a hidden ``ptr`` to the calling thread's thread-pool record, and ``threads()``
    returns that address (`lang.parallel.par_address`); the callable supplies it, as the record.
    Not part of the identity either: the extra ``ptr`` in ``args`` is.

    ``slp``: False turns LLVM's SLP vectoriser (straight-line code packed into vectors) off
    for this kernel (`optimize.options_for`), as numba has it by default; part of the identity
    and, through the optimisation options, of the cache key. For a loop whose body SLP packs
    into shuffles that cost more than the scalar code on some CPUs (the voxel kernel of
    benchmarks/_user_kernels.py on Zen 3; docs/kernel-language.md).
    """

    name: str
    build: Callable[..., None]
    static: Mapping[str, Any] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    ret: str | None = None
    fastmath: tuple[str, ...] = ()
    version: int = 1
    arg_docs: tuple[Arg, ...] = ()
    source: str = ""
    error_record: Callable[["KernelSpec", Any], Exception] | None = None
    threads: Callable[[], int] | None = None
    slp: bool = True

    def __post_init__(self) -> None:
        # Specs are written by kernel authors, not users: a bad spec is a CompileError (a bug).
        if not self.name or not isinstance(self.name, str):
            raise CompileError(f"kernel spec needs a non-empty name, got {self.name!r}")
        self._split_arg_docs()
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "fastmath", tuple(self.fastmath))
        # Read-only view: the identity below is computed once and must not go stale.
        object.__setattr__(self, "static", MappingProxyType(dict(self.static)))
        for kind in self.args + ((self.ret,) if self.ret is not None else ()):
            if kind not in CTYPES:
                raise CompileError(f"kernel {self.name}: unknown arg/ret kind {kind!r}; "
                                   f"use one of {sorted(CTYPES)}")
        if self.error_record is not None and not (self.static.get("_debug") is True
                                                  and self.args[-1:] == ("ptr",)):
            raise CompileError(f"kernel {self.name}: a debug build has static _debug=True and "
                               "the error record as its last (ptr) argument")
        unknown = set(self.fastmath) - FASTMATH_FLAGS
        if unknown:
            raise CompileError(f"kernel {self.name}: unknown fast-math flags {sorted(unknown)}")
        try:
            static_json = self.static_json()
        except (TypeError, ValueError) as exc:
            raise CompileError(f"kernel {self.name}: static params are not JSON-serialisable: "
                               f"{exc}") from exc
        # Computed once: get_kernel looks specs up by identity on every call (memo hits).
        ident = (self.name, _qualified(self.build), static_json, self.args, self.ret,
                 tuple(sorted(self.fastmath)), self.version, self.source, self.slp)
        object.__setattr__(self, "_identity", ident)
        object.__setattr__(self, "_hash", hash(ident))

    def _split_arg_docs(self) -> None:
        """``args`` may list `Arg` declarations: keep their kinds in ``args`` (the ABI, part of
        the identity) and the declarations in ``arg_docs`` (documentation, not identity)."""
        docs = tuple(self.arg_docs) or tuple(a for a in self.args if isinstance(a, Arg))
        if any(isinstance(a, Arg) for a in self.args):
            if len(docs) != len(self.args) or not all(isinstance(a, Arg) for a in self.args):
                raise CompileError(f"kernel {self.name}: declare every argument as an Arg, or "
                                   "none")
            object.__setattr__(self, "args", tuple(a.kind for a in docs))
        if docs and len(docs) != len(self.args):
            raise CompileError(f"kernel {self.name}: {len(docs)} documented arguments for "
                               f"{len(self.args)} in the signature")
        for doc, kind in zip(docs, self.args):
            doc.check(self.name)
            if doc.kind != kind:
                raise CompileError(f"kernel {self.name}: argument {doc.name!r} is documented as "
                                   f"{doc.kind}, the signature says {kind}")
        if len({d.name for d in docs}) != len(docs):
            raise CompileError(f"kernel {self.name}: duplicate argument names")
        object.__setattr__(self, "arg_docs", docs)

    # -- identity --------------------------------------------------------------------------
    def static_json(self) -> str:
        """Canonical JSON of the static params (sorted keys, no spaces)."""
        return json.dumps(dict(self.static), sort_keys=True, separators=(",", ":"), allow_nan=True)

    def identity(self) -> tuple:
        """Hashable identity: two specs with equal identity render the same IR (memo key).

        The generator is identified by module + qualified name, so a lambda or a closure whose
        output depends on captured values must put those values in ``static`` or ``version``.
        """
        return self._identity

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KernelSpec) and self.identity() == other.identity()

    def __hash__(self) -> int:
        return self._hash

    # -- derived ---------------------------------------------------------------------------
    @property
    def fn_name(self) -> str:
        """The symbol the kernel is defined under (the name, made a C identifier)."""
        return "cuvil_" + _SYMBOL_UNSAFE.sub("_", self.name)

    def static_str(self) -> str:
        """Short human-readable static params, e.g. ``n=1024 c=64`` (for tables)."""
        return " ".join(f"{k}={_short(v)}" for k, v in sorted(self.static.items()))

    def with_static(self, **changes: Any) -> "KernelSpec":
        """The same kernel with some static params replaced or added."""
        return replace(self, static={**self.static, **changes})

    @property
    def call_args(self) -> tuple[str, ...]:
        """The argument kinds callers pass: ``args`` without a debug build's error record and a
        prange kernel's thread-pool record."""
        hidden = (self.error_record is not None) + (self.threads is not None)
        return self.args[:len(self.args) - hidden]

    def release(self) -> "KernelSpec":
        """The release build of a debug spec (no ``_debug``, no error record); else itself."""
        if self.error_record is None:
            return self
        static = {k: v for k, v in self.static.items() if k != "_debug"}
        docs = self.arg_docs[:-1] if self.arg_docs else ()
        return replace(self, static=static, args=self.args[:-1], arg_docs=docs,
                       error_record=None)

    def cfunctype(self) -> type:
        """The ctypes ``CFUNCTYPE`` prototype (releases the GIL during the call)."""
        restype = CTYPES[self.ret] if self.ret is not None else None
        return ctypes.CFUNCTYPE(restype, *(CTYPES[a] for a in self.args))


def _qualified(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"


def _short(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, separators=(",", ":")) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."
