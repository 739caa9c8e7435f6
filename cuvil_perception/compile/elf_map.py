"""Map relocatable x86-64 ELF objects, as `codegen` emits them, into executable memory without
LLVM: the warm-start path of `loader` on x86-64 Linux.

A cached kernel needs no code generation, only its object placed in memory and relocated. MCJIT
does that too, but a fresh process pays ~1-1.3 ms to set it up first (LLVM's native target
registration, an IR context and empty module, a target machine, the engine; AMD EPYC Zen 4
AVX-512 VNNI), a third of a warm start; this module does the placing in ~0.1 ms.

What our objects hold (PIC, default code model; checked over the ~300 objects of a cache): a
``.text`` section, ``.rodata*`` constant pools, ``R_X86_64_PC32`` relocations to them and
``R_X86_64_PLT32`` calls to libc/libm functions (``memset``, ``atan2f``, ...). Sections are
laid out in one anonymous mapping -- code (then one 16-byte jump stub per external function,
``jmp *0(%rip)`` and its address, so a call reaches it from anywhere), read-only data, writable
data -- each region page-aligned and then protected read+execute, read-only and read+write.
External symbols are looked up in the process (``dlsym``), as MCJIT does. Unwind tables
(``.eh_frame``) are not loaded: nothing unwinds through a kernel (no C++ exceptions; a signal
stops the process). Anything else (another relocation type, a GOT reference, a common symbol, an
unknown external, a 32-bit value that does not fit, thread-local data, constructors) raises
`Unsupported` before anything runs, and `loader` maps that object with MCJIT instead.

Mappings are never unmapped: callables keep their `Image`, and `loader` keeps every image for
the life of the process (machine code freed under a running thread is a crash).
"""

from __future__ import annotations

import ctypes
import mmap
import struct

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")
_EM_X86_64, _ET_REL = 62, 1
_SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS = 2, 4, 8
_SHF_WRITE, _SHF_ALLOC, _SHF_EXEC, _SHF_TLS = 0x1, 0x2, 0x4, 0x400
_SHT_INIT = (14, 15, 16)  # SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY
_SHN_UNDEF, _SHN_ABS = 0, 0xFFF1
_R_64, _R_PC32, _R_PLT32 = 1, 2, 4
_STB_LOCAL = 0
_STUB = b"\xff\x25\x00\x00\x00\x00"  # jmp *0(%rip); the 8-byte address follows
_STUB_SIZE = 16

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


class Unsupported(Exception):
    """The object holds something this mapper does not do (MCJIT maps it instead)."""


class Image:
    """Objects mapped together: ``get_function_address(name)`` of their global functions (0
    when absent, as MCJIT's engine answers)."""

    def __init__(self, memory: mmap.mmap, base: int, functions: dict[str, int]):
        self._memory, self.base, self._functions = memory, base, functions  # (never closed)
        self.size = len(memory)

    def get_function_address(self, name: str) -> int:
        return self._functions.get(name, 0)


class _Object:
    """One parsed object: its section headers, symbols and the sections to load."""

    def __init__(self, blob: bytes):
        try:
            head = _EHDR.unpack_from(blob)
        except struct.error as exc:
            raise Unsupported("not an ELF object") from exc
        ident, etype, machine = head[0], head[1], head[2]
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1 \
                or etype != _ET_REL or machine != _EM_X86_64:
            raise Unsupported("not a 64-bit little-endian x86-64 relocatable object")
        shoff, shentsize, shnum = head[6], head[11], head[12]
        self.blob = blob
        self.sections = [_SHDR.unpack_from(blob, shoff + k * shentsize) for k in range(shnum)]
        names = self.sections[head[13]]
        self.name = [_cstr(blob, names[4] + s[0]) for s in self.sections]
        self.load = [k for k, s in enumerate(self.sections)
                     if s[2] & _SHF_ALLOC and s[5] and self.name[k] != ".eh_frame"]
        for k in self.load:  # thread-local data, code to run at load: MCJIT's business
            if self.sections[k][2] & _SHF_TLS or self.sections[k][1] in _SHT_INIT:
                raise Unsupported(f"section {self.name[k]}")
        self.symbols: list[tuple] = []
        self.strtab = 0
        for s in self.sections:
            if s[1] == _SHT_SYMTAB:
                self.symbols = [_SYM.unpack_from(blob, s[4] + k * _SYM.size)
                                for k in range(s[5] // _SYM.size)]
                self.strtab = self.sections[s[6]][4]
        self.base: dict[int, int] = {}  # section index -> address (after layout)

    def region(self, k: int) -> int:
        """0 code, 1 read-only data, 2 writable data."""
        flags = self.sections[k][2]
        return 0 if flags & _SHF_EXEC else 2 if flags & _SHF_WRITE else 1

    def symbol_name(self, sym: tuple) -> str:
        return _cstr(self.blob, self.strtab + sym[0])


def _cstr(blob: bytes, at: int) -> str:
    return blob[at:blob.index(b"\0", at)].decode("ascii")


def _align(value: int, to: int) -> int:
    return (value + to - 1) // to * to if to > 1 else value


def map_objects(blobs: list[bytes]) -> Image:
    """Map ``blobs`` (relocatable x86-64 ELF objects) into one `Image`; raises `Unsupported`
    (nothing mapped that runs) for an object outside what the module docstring lists or one
    that does not parse."""
    try:
        return _map(blobs)
    except (struct.error, IndexError, KeyError, ValueError, UnicodeDecodeError) as exc:
        raise Unsupported(f"malformed object ({type(exc).__name__}: {exc})") from exc


def _map(blobs: list[bytes]) -> Image:
    objects = [_Object(b) for b in blobs]
    externals = _externals(objects)
    offsets, ends = [[], [], []], [0, 0, 0]
    ends[0] = len(externals) * _STUB_SIZE  # the stubs open the code region
    for obj in objects:
        for k in obj.load:
            r, align = obj.region(k), obj.sections[k][8]
            ends[r] = _align(ends[r], max(align, 1))
            offsets[r].append((obj, k, ends[r]))
            ends[r] += obj.sections[k][5]
    page = mmap.PAGESIZE
    sizes = [_align(e, page) for e in ends]
    total = sum(sizes)
    try:  # (Python's mmap: a writable buffer without a ctypes array type of each size)
        memory = mmap.mmap(-1, total, flags=mmap.MAP_PRIVATE,
                           prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError) as exc:  # (ValueError: nothing to map)
        raise Unsupported(f"mmap failed: {exc}") from exc
    anchor = ctypes.c_char.from_buffer(memory)  # (its address; keeps the mapping open)
    functions = _fill(objects, externals, offsets, memory, ctypes.addressof(anchor), sizes)
    return Image(memory, ctypes.addressof(anchor), functions)


def _fill(objects: list[_Object], externals: dict, offsets: list, memory: mmap.mmap,
          base: int, sizes: list[int]) -> dict[str, int]:
    """Copy the stubs and sections into ``memory`` (mapped at ``base``), relocate, protect;
    returns {name: address} of the global symbols."""
    starts = [base, base + sizes[0], base + sizes[0] + sizes[1]]
    stubs = {}
    for i, (name, address) in enumerate(externals.items()):
        at = i * _STUB_SIZE
        memory[at:at + 14] = _STUB + struct.pack("<Q", address)
        stubs[name] = base + at
    for r in range(3):
        for obj, k, off in offsets[r]:
            obj.base[k] = starts[r] + off
            s = obj.sections[k]
            if s[1] != _SHT_NOBITS:  # (NOBITS: zeros, as the fresh mapping is)
                at = starts[r] - base + off
                memory[at:at + s[5]] = obj.blob[s[4]:s[4] + s[5]]
    functions: dict[str, int] = {}
    for obj in objects:
        _relocate(obj, memory, base, externals, stubs)
        functions.update(_globals(obj))
    for r, prot in enumerate((mmap.PROT_READ | mmap.PROT_EXEC, mmap.PROT_READ,
                              mmap.PROT_READ | mmap.PROT_WRITE)):
        if sizes[r] and _libc.mprotect(starts[r], sizes[r], prot) != 0:
            raise Unsupported(f"mprotect failed (errno {ctypes.get_errno()})")
    return functions


def _externals(objects: list[_Object]) -> dict[str, int]:
    """{name: address in this process} of every undefined symbol a relocation names."""
    out: dict[str, int] = {}
    for obj in objects:
        for sym in obj.symbols[1:]:
            if sym[3] == _SHN_UNDEF and sym[0]:
                name = obj.symbol_name(sym)
                if name not in out:
                    try:
                        out[name] = ctypes.cast(_libc[name], ctypes.c_void_p).value
                    except AttributeError as exc:
                        raise Unsupported(f"unknown external symbol {name}") from exc
    return out


def _relocate(obj: _Object, memory, base: int, externals: dict, stubs: dict) -> None:
    for s in obj.sections:
        target = s[7]
        if s[1] != _SHT_RELA or target not in obj.base:
            continue  # (relocations of a section not loaded: .eh_frame)
        place0 = obj.base[target]
        for k in range(s[5] // _RELA.size):
            offset, info, addend = _RELA.unpack_from(obj.blob, s[4] + k * _RELA.size)
            kind, sym = info & 0xFFFFFFFF, obj.symbols[info >> 32]
            place = place0 + offset
            if sym[3] == _SHN_UNDEF:
                name = obj.symbol_name(sym)
                value = stubs[name] if kind == _R_PLT32 else externals[name]
            elif sym[3] == _SHN_ABS:
                value = sym[4]
            elif sym[3] in obj.base:
                value = obj.base[sym[3]] + sym[4]
            else:
                raise Unsupported(f"relocation against section {sym[3]}, not loaded")
            if kind == _R_64:
                struct.pack_into("<Q", memory, place - base, (value + addend) % (1 << 64))
            elif kind in (_R_PC32, _R_PLT32):
                delta = value + addend - place
                if not -(1 << 31) <= delta < (1 << 31):
                    raise Unsupported("a 32-bit relative relocation out of range")
                struct.pack_into("<i", memory, place - base, delta)
            else:
                raise Unsupported(f"relocation type {kind}")


def _globals(obj: _Object) -> dict[str, int]:
    out = {}
    for sym in obj.symbols[1:]:
        if sym[1] >> 4 != _STB_LOCAL and sym[3] in obj.base and sym[0]:
            out[obj.symbol_name(sym)] = obj.base[sym[3]] + sym[4]
    return out
