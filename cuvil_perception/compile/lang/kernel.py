"""``@kernel``: a typed Python function compiled to native code through its AST.

Positional parameters are run-time arguments: buffers (``Buf[f32, "n", 4]``, passed as numpy
arrays or addresses) and scalars (``i32 i64 f32 f64``). Keyword-only parameters (after ``*``)
are static: compile-time constants (ints, floats, bools, tuples) that loop bounds, extents and
unrolled loops use; each distinct set of static values is its own `KernelSpec`.

    @kernel
    def axpy(x: Buf[f32, "n"], y: Buf[f32, "n"], a: f32, *, n: int):
        for i in range(n):
            y[i] += a * x[i]

    axpy(x, y, 2.0, n=len(x))          # compiles once per n (memoised, disk-cached), then runs
    axpy.py_func(x, y, 2.0, n=len(x))  # the same function, uncompiled, on the numpy arrays
    axpy.spec(n=1024)                  # the KernelSpec (prewarm, get_kernel, compile --target)

Buffers are ``noalias`` (they must not overlap; pass ``noalias=False`` when they may). A
bounds-checked build (``debug=True``, or ``CUVIL_KERNEL_DEBUG=1`` for every kernel) checks every
index and raises `KernelIndexError` naming the buffer, the index and the source line; it takes
one extra hidden argument, an int64[4] error record that the callable `get_kernel` returns
supplies and checks (`loader`), so ``kernel(...)`` and ops calling with raw addresses alike
need no change. ``Kernel.static_params(spec)`` gives a spec's static values as keyword
arguments (for ``py_func``), without the build's ``_debug`` flag.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import sys
import types

from llvmlite import ir

from ... import config
from ...errors import KernelIndexError, KernelSourceError, Location
from ..registry import get_kernel
from ..source_digests import file_digest, save_index, source_file
from ..spec import CTYPES, Arg, KernelSpec
from .arguments import checked_arguments, plain_static
from .dispatch import MISS, Entry, Specialized, bind_extents, call_key
from .constants import current, fileless_source, is_constant, reachable, referenced
from .markers import split
from .parallel import PAR_ARG, par_address, uses_prange
from .passes import lower_kernel
from .signature import kernel_args
from .slices import value_slices
from .source import remember
from .types import PARAM_KINDS, BufType
from .values import Val


def kernel(fn=None, *, name: str | None = None, fastmath: tuple = (), noalias: bool = True,
           debug: bool = False, version: int = 1, slp: bool = True):
    """Decorate a typed function as a kernel (usable bare or with options).

    ``name``: the spec name (default ``<module tail>.<function>``); ``fastmath``: LLVM fast-math
    flags put on every float operation (e.g. ``("contract",)`` for FMA; documented per kernel;
    flags that kmath helpers add themselves need not be listed, see `compile.fastmath`);
    ``version``: bump to force a rebuild when something outside the source changes the code;
    ``slp=False``: no SLP vectorisation for this kernel (`KernelSpec`; docs/kernel-language.md)."""
    def wrap(f):
        return Kernel(f, name=name, fastmath=tuple(fastmath), noalias=noalias, debug=debug,
                      version=version, slp=slp)
    return wrap(fn) if fn is not None else wrap


class Kernel:
    """A compiled-on-demand kernel; see the module docstring."""

    def __init__(self, fn, *, name, fastmath, noalias, debug, version, slp=True):
        remember(fn)  # the text Python compiled, whatever happens to the file (see `source`)
        self.py_func = value_slices(fn, params=True)  # (rebuilt: see `slices`)
        fn.__cuvil_kernel__ = self.py_func.__cuvil_kernel__ = self
        self.__doc__, self.__name__ = fn.__doc__, fn.__name__
        self.name = name or f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"
        self.fastmath, self.noalias, self.debug, self.version = fastmath, noalias, debug, version
        self.slp = slp
        self._params, self._digest, self._refs, self._streams = None, None, (), None
        self._roles: tuple = ()  # each run-time parameter's role marker or None (`markers`)
        self._digests: dict[tuple, str] = {}  # current constant values -> source digest
        self._written: dict[tuple, tuple] = {}  # spec identity -> `_layout`
        self._entries: dict[tuple, Entry] = {}  # call key -> `dispatch.Entry`
        self._extents_from: tuple | None = None  # `dispatch.bind_extents`' plan
        self._build = _builder(self)

    # -- signature ----------------------------------------------------------------------
    def params(self) -> tuple[list, list, object]:
        """(run-time [(name, Scalar | BufType)], static [name], return Scalar | None)."""
        if self._params is None:
            runtime, statics, ret, self._roles = _signature(self)
            self._params = (runtime, statics, ret)
        return self._params

    def source_digest(self) -> str:
        """sha256 of the kernel's module file and the files of the helpers it can call, and of
        the current values of the module-level constants they read (`constants`)."""
        if self._digest is None:
            self._digest = _digest_sources(self.py_func)
            self._refs = referenced(self.py_func)
        values = current(self._refs)
        found = self._digests.get(values)
        if found is None:
            found = hashlib.sha256(f"{self._digest}{values!r}".encode()).hexdigest()[:24]
            self._digests[values] = found
        return found

    def spec(self, debug: bool | None = None, **static) -> KernelSpec:
        """The `KernelSpec` for these static values (a debug spec takes the error record);
        its ``arg_docs`` (the C header of a library; not identity) come from the annotations
        and their role markers (`signature`)."""
        runtime, statics, ret = self.params()
        missing = [s for s in statics if s not in static and s not in self._defaults()]
        unknown = sorted(set(static) - set(statics))
        if missing or unknown:
            names = [p for p, _ in runtime]
            raise KernelSourceError(f"kernel {self.name}: static parameters missing {missing}, "
                                    f"unknown {unknown}; it takes {statics} by keyword, after "
                                    f"its run-time arguments {names} by position")
        values = {k: plain_static(v) for k, v in {**self._defaults(), **static}.items()}
        debug = self.debug or config.kernel_debug() if debug is None else debug
        args = tuple("ptr" if isinstance(t, BufType) else PARAM_KINDS[t] for _, t in runtime)
        parallel = uses_prange(self.py_func)
        args += ("ptr",) * parallel
        if debug:
            values["_debug"] = True
            args += ("ptr",)
        docs = kernel_args(runtime, self._roles, values, self.py_func)
        docs += (PAR_ARG,) * parallel
        if debug:
            docs += (Arg("error_record", "ptr", "i64", (4,), role="out",
                         doc="bounds-check error record"),)
        return KernelSpec(name=self.name, build=self._build, static=values, args=args,
                          arg_docs=docs, ret=PARAM_KINDS[ret] if ret is not None else None,
                          fastmath=self.fastmath, version=self.version,
                          source=self.source_digest(),
                          error_record=self.index_error if debug else None,
                          threads=par_address if parallel else None, slp=self.slp)

    def specialize(self, **static) -> Specialized:
        """This kernel with static values bound once (`dispatch.Specialized`)."""
        return Specialized(self, static)

    @staticmethod
    def static_params(spec: KernelSpec) -> dict:
        """``spec``'s static values as this kernel's keyword arguments (``py_func(...,
        **static)``): without the ``_debug`` flag a bounds-checked build adds."""
        return {k: v for k, v in spec.static.items() if k != "_debug"}

    def _defaults(self) -> dict:
        """Default values of the static parameters (read from the function, not its source)."""
        return dict(self.py_func.__kwdefaults__ or {})

    # -- running ------------------------------------------------------------------------
    def __call__(self, *args, **static):
        """Run on numpy arrays / scalars: through the entry of these static values, else in
        full (compiling, memoised, and filing the entry: `dispatch`)."""
        if self._extents_from != ():  # (None: not planned yet)
            static = bind_extents(self, args, static)
        entry = self._entries.get(call_key(self, static))
        if entry is not None:
            out = entry.native(*args)  # (`trampoline`: checks, calls, GIL released)
            if out is MISS:
                out = entry.call(args)  # (declined there: the Python checks)
            if out is not MISS:
                return out
        return self._call_checked(args, static)

    def _call_checked(self, args: tuple, static: dict):
        """The full call: build the spec, check every argument, run; then file a `dispatch`
        entry for the next call with the same static values."""
        spec = self.spec(**static)
        key = call_key(self, static)  # (after `spec`: the constants it reads are known)
        entry = Entry(self, spec) if key is not None and key not in self._entries else None
        fn = entry.fn if entry is not None else get_kernel(spec)
        raw = checked_arguments(self, spec, args)
        out = fn(*raw)  # a debug build's callable supplies and checks the error record
        if entry is not None:
            self._entries[key] = entry  # (filed once the call went through)
        return out

    def written(self, spec: KernelSpec) -> frozenset:
        """Names of the buffer parameters the kernel may write for ``spec``'s static values
        (stores, simd stores, ``address()``); lowered once per spec, only when a read-only array
        is passed (numpy's read-only flag guards memory a write would corrupt or fault on)."""
        return self._layout(spec)[0]

    def _layout(self, spec: KernelSpec) -> tuple[frozenset, dict]:
        """(written buffer names, {buffer name: alignment its streaming stores need})."""
        found = self._written.get(spec.identity())
        if found is None:
            low = lower_kernel(self, spec.fn_name, dict(spec.static))[1]
            found = (frozenset(low.written), dict(low.streamed))
            self._written[spec.identity()] = found
        return found

    def stream_alignment(self, spec: KernelSpec) -> dict:
        """{buffer name: alignment in bytes its streaming stores need} (empty for a kernel
        whose code names none and for a debug build, which checks each store itself)."""
        if spec.error_record is not None:
            return {}
        if self._streams is None:
            self._streams = any(name in f.__code__.co_names for f in reachable(self.py_func)
                                for name in ("stream_store", "stream_fill", "stream_copy"))
        return self._layout(spec)[1] if self._streams else {}

    def index_error(self, spec: KernelSpec, record) -> KernelIndexError:
        """The exception for a debug build's error record ``(site + 1, index, extent, 0)``
        (re-lowers the kernel to find the site table; only ever on the error path)."""
        lowerer = lower_kernel(self, spec.fn_name, dict(spec.static))[1]
        where, buf, axis = lowerer.sites[int(record[0]) - 1]
        extent = "unknown" if record[2] < 0 else str(int(record[2]))
        return KernelIndexError(f"{where}: index {int(record[1])} out of range for axis {axis} "
                                f"of '{buf}' (extent {extent}) in kernel {self.name}")

    def __repr__(self) -> str:
        return f"<kernel {self.name}>"


def _builder(k: Kernel):
    def build(module: ir.Module, fn_name: str, **static) -> None:
        lower_kernel(k, fn_name, static, module)
    build.__module__ = k.py_func.__module__
    build.__qualname__ = f"{k.py_func.__qualname__}.<kernel>"
    build.input_buffers = lambda spec: _input_buffers(k, spec)  # for library headers
    return build


def _input_buffers(k: Kernel, spec: KernelSpec) -> frozenset:
    """Buffers without a role marker that ``spec`` only reads (`cheader` then declares them
    ``const`` and ``in``); a marker's role is kept as declared."""
    runtime = k.params()[0]
    open_role = frozenset(n for (n, t), role in zip(runtime, k._roles)
                          if isinstance(t, BufType) and role is None)
    return open_role - k.written(spec) if open_role else frozenset()


def _signature(k: Kernel):
    fn = k.py_func
    where = Location(inspect.getsourcefile(fn) or "?", fn.__code__.co_firstlineno, 1)
    try:
        sig = inspect.signature(fn, eval_str=True)
    except Exception as exc:  # a bad annotation: name the kernel and the problem
        raise KernelSourceError(f"kernel {k.name}: cannot evaluate its annotations: {exc}",
                                where) from None
    runtime, statics, roles = [], [], []
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY:
            statics.append(p.name)
            continue
        if p.kind is not p.POSITIONAL_OR_KEYWORD:
            raise KernelSourceError(f"kernel {k.name}: parameter '{p.name}': *args/**kwargs "
                                    f"are not supported; write named parameters instead", where)
        ty, role = split(p.annotation)
        if not (isinstance(ty, BufType) or ty in PARAM_KINDS):
            raise KernelSourceError(f"kernel {k.name}: parameter '{p.name}' needs a type: "
                                    f"Buf[dtype, extents...] or one of i32, i64, f32, f64 "
                                    f"(got {ty!r}); static values go after `*`", where)
        runtime.append((p.name, ty))
        roles.append(role)
    ret = sig.return_annotation
    ret = None if ret in (inspect.Signature.empty, None) else ret
    if ret is not None and ret not in PARAM_KINDS:
        raise KernelSourceError(f"kernel {k.name}: return type {ret!r}; write one of i32, i64, "
                                f"f32, f64 or nothing instead", where)
    return runtime, statics, ret, tuple(roles)


def _digest_sources(fn) -> str:
    """Hash of the kernel's module file plus the files of every module it can reach through
    module globals that are helpers (``@inline``), kernels or modules, transitively (a helper
    calling a helper of a third module is covered); and of the values of those modules'
    constants, which kernels read as compile-time values wherever they were defined (``from
    .params import EPS``). The kernel's own module, the modules of its helpers and kernels and
    the modules of its own package are hashed wherever they are installed (a user's package in
    site-packages: an upgrade must not load the old machine code); other modules only outside
    the Python installation. Each file is read once per process (`source_digests.file_digest`)."""
    files, constants = _module_closure(fn.__module__)
    h = hashlib.sha256()
    for path in sorted(files | {source_file(fn, anywhere=True)} - {None}):
        h.update(path.encode())
        h.update(file_digest(path))
    h.update(constants.encode())
    h.update((fileless_source(fn.__code__) or "").encode())  # a notebook cell's kernel
    save_index()  # (digests recorded for the next process, `source_digests`)
    return h.hexdigest()[:24]


@functools.lru_cache(maxsize=None)
def _module_closure(module_name: str) -> tuple[frozenset, str]:
    """(files, constants) of ``module_name`` and of the modules its helpers, kernels and
    imported modules come from, transitively; constants as sorted ``module.name=repr`` lines
    (memoised: the kernels of one module share it)."""
    files: set[str] = set()
    constants: list[str] = []
    package = module_name.split(".")[0]
    pending, seen = [(module_name, True)], set()
    while pending:
        name, ours = pending.pop()
        module = sys.modules.get(name)
        if module is None or module.__name__ in seen:
            continue
        own = source_file(module, anywhere=ours or name.split(".")[0] == package)
        if own is None:
            continue  # the standard library or another installed package: not ours to key
        seen.add(module.__name__)
        files.add(own)
        for key, obj in list(vars(module).items()):
            if isinstance(obj, Kernel):
                obj = obj.py_func
            if isinstance(obj, types.ModuleType):
                pending.append((obj.__name__, False))
            elif getattr(obj, "__cuvil_inline__", False) or hasattr(obj, "__cuvil_kernel__"):
                pending.append((getattr(obj, "__module__", None) or "", True))
            elif not key.startswith("__") and is_constant(obj):
                constants.append(f"{module.__name__}.{key}={obj!r}")
    return frozenset(files), "\n".join(sorted(constants))


__all__ = ["Kernel", "kernel", "CTYPES", "Val"]
