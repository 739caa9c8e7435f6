"""Step 3 of 3, load: object-file bytes -> mapped code -> ctypes ``CFUNCTYPE`` callable.

On x86-64 Linux objects are mapped by `elf_map` (placed and relocated in Python, no LLVM
set-up); elsewhere, or for an object it does not take, by an MCJIT engine created from an empty
module with its own target machine (one target machine per MCJIT engine: sharing one segfaults
in llvmlite 0.50). `load_many` maps several objects of distinct kernels together (one `Image`
or engine: a warm start's cache hits, loaded together). Images and engines are kept alive for
the life of the process: the callable holds a reference to its own (``engine``), and
`_ENGINES` holds one too, because machine code freed under a running thread is a crash, not an
exception.

The callable is a ctypes ``CFUNCTYPE`` object: ctypes releases the GIL for the duration of the
call, so kernels run in parallel with Python threads and with each other. Pass buffers as int
addresses (``arr.ctypes.data``, cached once per preallocated buffer): ~0.4 us per call, against
4-9 us for ``arr.ctypes.data_as(...)``. A kernel keeps no state between calls, so it may be
called from several threads at once as long as they do not write the same buffers.

A debug build (``spec.error_record`` set) is bound the same way, then wrapped (`_checked`): the
wrapper takes the release build's arguments, appends a fresh int64[4] error record, calls the
``CFUNCTYPE`` (the GIL is still released during the native call) and raises the spec's
exception when the record is set. So every caller -- an op's wrapper calling with raw
addresses, ``kernel(...)``, prewarm -- gets the bounds checks without passing the record; the
release path returns the bare ``CFUNCTYPE``, so its call cost does not change.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading

import llvmlite.binding as llvm

from .. import config
from ..errors import CompileError
from . import elf_map
from .spec import KernelSpec
from .target import Target

_ENGINES: list = []  # MCJIT engines and `elf_map.Image`s
_ELF_MAP = True  # (tests compare both ways)
_perf_lock = threading.Lock()


def load(spec: KernelSpec, obj: bytes, target: Target, key: str = ""):
    """Map ``obj`` (compiled for the host ``target``) and bind ``spec.fn_name``.

    Returns the ``CFUNCTYPE`` callable; extra attributes: ``spec``, ``address`` (int), ``size``
    (bytes of machine code), ``key`` (cache key) and ``engine`` (keeps the code mapped).
    Raises `CompileError` if the object does not define the symbol.
    """
    return load_many([(spec, obj, key)], target)[0]


def load_many(items: list[tuple[KernelSpec, bytes, str]], target: Target) -> list:
    """`load` for several (spec, object, key) at once, in order: the objects share one mapping
    (`_map`; with MCJIT one target machine and relocation pass, ~0.3 ms a kernel against ~1.2
    ms each on its own). Objects export nothing but their kernel's symbol (`render` makes every
    other definition internal), so objects of distinct kernels can share an engine; two
    objects of one kernel name (two static shapes) go to different engines."""
    if not target.host:
        names = ", ".join(spec.name for spec, _, _ in items)
        raise CompileError(f"kernel {names}: cannot load code built for {target.triple}")
    groups: list[dict[str, int]] = []  # fn_name -> index into items, per engine
    for i, (spec, _, _) in enumerate(items):
        group = next((g for g in groups if spec.fn_name not in g), None)
        if group is None:
            group = {}
            groups.append(group)
        group[spec.fn_name] = i
    out: list = [None] * len(items)
    for group in groups:
        blobs = [items[i][1] for i in group.values()]
        engine = _map(blobs, target)
        _ENGINES.append(engine)
        for i in group.values():
            spec, obj, key = items[i]
            out[i] = _bind(spec, engine, _text_size(obj), key)
    return out


def _map(blobs: list[bytes], target: Target):
    """The objects mapped together: by `elf_map` on x86-64 Linux (no LLVM set-up: ~1 ms less
    a warm start), else, or for an object it does not take, by an MCJIT engine."""
    if _ELF_MAP and target.triple.startswith("x86_64-") and "linux" in target.triple:
        try:
            return elf_map.map_objects(blobs)
        except elf_map.Unsupported:
            pass
    return _mcjit(blobs, target)


def _mcjit(blobs: list[bytes], target: Target):
    # MCJIT needs a module to be created; the objects come compiled, so the empty module is
    # taken out again before finalize_object, which would otherwise set up LLVM's whole
    # codegen pipeline to emit nothing (~0.9 ms of a warm start; opt=0 for the same reason).
    # Taken out only after the objects are added: adding one to a module-less engine
    # segfaults in llvmlite 0.50.
    # The engine's target machine is the generic CPU of the host triple: it never generates
    # code here (the objects come compiled for the host CPU, and relocating them needs no CPU),
    # and one for the host CPU's ~100 features costs ~0.2 ms more to make.
    empty = llvm.parse_assembly("")
    engine = llvm.create_mcjit_compiler(empty, target.loading_machine())
    for blob in blobs:
        engine.add_object_file(llvm.ObjectFileRef.from_data(blob))
    engine.remove_module(empty)
    engine.finalize_object()
    return engine


def _bind(spec: KernelSpec, engine, size: int, key: str):
    address = engine.get_function_address(spec.fn_name)
    if not address:
        raise CompileError(f"kernel {spec.name}: object code has no symbol {spec.fn_name!r}")
    fn = spec.cfunctype()(address)
    if spec.error_record is not None:
        fn = _checked(spec, fn)
    if spec.threads is not None:
        fn = _threaded(spec, fn)
    fn.spec = spec
    fn.address = address
    fn.size = size
    fn.key = key
    fn.engine = engine
    if config.perf_map_enabled():
        write_perf_map(address, fn.size, spec.name)
    return fn


def _checked(spec: KernelSpec, native):
    """A callable taking ``spec.call_args`` that runs ``native`` (a debug build) with a fresh
    error record as its last argument and raises ``spec.error_record(spec, record)`` when the
    kernel set it. One record per call: concurrent calls from several threads stay apart."""
    explain, count = spec.error_record, len(spec.args) - 1

    def call(*args):
        if len(args) != count:
            raise TypeError(f"kernel {spec.name} takes {count} arguments ({len(args)} given)")
        record = (ctypes.c_int64 * 4)()
        out = native(*args, ctypes.addressof(record))
        if record[0]:
            raise explain(spec, tuple(record))
        return out

    call.native = native
    call.__name__ = call.__qualname__ = spec.fn_name
    return call


def _threaded(spec: KernelSpec, native):
    """A callable taking ``spec.call_args`` that runs ``native`` (a kernel with prange loops)
    with the calling thread's thread-pool record appended (``spec.threads()``)."""
    par = spec.threads

    def call(*args):
        return native(*args, par())

    call.native = native
    call.__name__ = call.__qualname__ = spec.fn_name
    return call


def _text_size(obj: bytes) -> int:
    """Bytes of executable code in the object ``obj``: the sum of its text sections.

    An object holds exactly one kernel function (helpers are inlined at O3), so this is the
    function's size, plus at most some alignment padding. Constant pools live in .rodata and
    are not counted. Read from the ELF section headers (`_elf_text_size`: ~10 us, against
    ~0.1 ms through LLVM's section iterator, a warm start's cost); another format through
    LLVM. Returns 0 if LLVM cannot list the sections.
    """
    size = _elf_text_size(obj)
    if size is not None:
        return size
    try:
        ref = llvm.ObjectFileRef.from_data(obj)
        return sum(s.size() for s in ref.sections() if s.is_text())
    except Exception:  # best effort: only used for perf maps and reports
        return 0


_ELF_HEAD = struct.Struct("<4s5B")  # magic, class, data (byte order), version, abi, abi version
_SECTION = struct.Struct("<IIQQQQ")  # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size
_SHF_EXECINSTR = 0x4  # what LLVM's ``isSectionText`` tests on ELF


def _elf_text_size(obj: bytes) -> int | None:
    """Sum of the sizes of the sections flagged executable (``SHF_EXECINSTR``) of a 64-bit
    little-endian ELF object, or None for anything else (or a header that does not fit)."""
    try:
        magic, elf_class, order = _ELF_HEAD.unpack_from(obj)[:3]
        if magic != b"\x7fELF" or elf_class != 2 or order != 1:
            return None
        shoff, = struct.unpack_from("<Q", obj, 0x28)
        entsize, count = struct.unpack_from("<HH", obj, 0x3A)
        total = 0
        for k in range(count):
            flags, size = _SECTION.unpack_from(obj, shoff + k * entsize)[2::3]
            if flags & _SHF_EXECINSTR:
                total += size
        return total
    except struct.error:
        return None


def write_perf_map(address: int, size: int, name: str) -> None:
    """Append ``<hexaddr> <hexsize> cuvil:<name>`` to /tmp/perf-<pid>.map (the perf JIT map
    format); a size of 0 is written as 1 so perf still attributes the start address."""
    line = f"{address:x} {max(size, 1):x} cuvil:{name}\n"
    with _perf_lock, open(f"/tmp/perf-{os.getpid()}.map", "a", encoding="ascii") as fh:
        fh.write(line)
