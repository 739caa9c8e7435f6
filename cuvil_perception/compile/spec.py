"""`KernelSpec`: what a native kernel is, and the identity it is memoised and cached under.

A kernel is declared by a name, an IR-building function and its static parameters. The spec itself
holds no IR and no machine code; rendering, compiling and loading are separate steps
(`render.py` -> `codegen.py` -> `loader.py`) that `registry.get_kernel` chains together.
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


@dataclass(frozen=True, eq=False)
class KernelSpec:
    """Declaration of one native kernel.

    ``build(module, fn_name, **static)`` must define exactly one function named ``fn_name`` in the
    llvmlite ``ir.Module`` it is given, with the signature ``ret fn_name(*args)``. ``static`` values
    are JSON-serialisable and are baked into the IR as constants (shapes, strides, thresholds).
    ``fastmath`` lists the fp flags the generator puts on its instructions (informational, and part
    of the identity); bump ``version`` whenever the generator's output changes. ``source`` is a
    digest of the source text the generator compiles (kernel-language kernels: the kernel's
    module and its helpers), so editing a kernel outside this package changes the identity too.
    """

    name: str
    build: Callable[..., None]
    static: Mapping[str, Any] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    ret: str | None = None
    fastmath: tuple[str, ...] = ()
    version: int = 1
    source: str = ""

    def __post_init__(self) -> None:
        # Specs are written by kernel authors, not users: a bad spec is a CompileError (a bug).
        if not self.name or not isinstance(self.name, str):
            raise CompileError(f"kernel spec needs a non-empty name, got {self.name!r}")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "fastmath", tuple(self.fastmath))
        # Read-only view: the identity below is computed once and must not go stale.
        object.__setattr__(self, "static", MappingProxyType(dict(self.static)))
        for kind in self.args + ((self.ret,) if self.ret is not None else ()):
            if kind not in CTYPES:
                raise CompileError(f"kernel {self.name}: unknown arg/ret kind {kind!r}; "
                                   f"use one of {sorted(CTYPES)}")
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
                 tuple(sorted(self.fastmath)), self.version, self.source)
        object.__setattr__(self, "_identity", ident)
        object.__setattr__(self, "_hash", hash(ident))

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

    def cfunctype(self) -> type:
        """The ctypes ``CFUNCTYPE`` prototype (releases the GIL during the call)."""
        restype = CTYPES[self.ret] if self.ret is not None else None
        return ctypes.CFUNCTYPE(restype, *(CTYPES[a] for a in self.args))


def _qualified(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"


def _short(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, separators=(",", ":")) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."
