"""The cache keys: what a compiled object depends on, hashed.

`cache_key` (the object's key): sha256 over (IR text, llvmlite version, LLVM version, triple, CPU
name, CPU feature string, optimisation options, kernel name, generator version). Anything that
can change the machine code is in it, so a key mismatch is always a miss and never a wrong kernel.

`fast_key` (an alias to it, so a warm start need not render IR, which costs 1-8 ms per model
kernel in Python): the same fields with the spec's identity (name, generator, static params,
version) and a fingerprint of the generator's source code in place of the IR text. The fingerprint
hashes the content of every ``.py`` file of the compiler (``cuvil_perception/compile``), the
package's top-level modules, and, for a generator outside the compiler, its own directory or
the whole package (`_fingerprint_dirs`; `source_digests.tree_digest`: each file hashed once per
process, and again only when its ``stat`` changed), so editing any of them re-renders (and
then usually finds the object under its IR key anyway); a
kernel-language spec's identity also carries the digest of its module and of the modules its
helpers come from, wherever they are. A generator whose output depends on anything else (files
it reads, code outside those directories) must put that in ``static`` or bump ``version``.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from .optimize import OptOptions
from .source_digests import tree_digest
from .spec import KernelSpec
from .target import Target

#: Bump when the way objects are produced changes in a way the fields below do not capture.
TOOLCHAIN_EPOCH = 2  # 2: llvm.fma split into fmul + fadd on targets without FMA (fma_split)


_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_COMPILE_DIR = _PACKAGE_DIR / "compile"


def _toolchain_fields(target: Target, opts: OptOptions) -> list[str]:
    return [
        f"epoch={TOOLCHAIN_EPOCH}",
        f"llvmlite={llvmlite.__version__}",
        f"llvm={'.'.join(map(str, llvm.llvm_version_info))}",
        f"triple={target.triple}",
        f"cpu={target.cpu}",
        f"features={target.features}",
        f"opt={opts.key_material()}",
    ]


def key_material(ir_text: str, spec: KernelSpec, target: Target, opts: OptOptions) -> list[str]:
    """The labelled fields that go into the key (also handy to explain a miss)."""
    return _toolchain_fields(target, opts) + [
        f"name={spec.name}",
        # Two specs whose IR is the same (a static parameter the code does not use, i8 and u8
        # variants) are still two entries: an entry records its static params and is checked
        # against them on load, so one shared key had the two evict each other with warnings.
        f"static={spec.static_json()}",
        f"version={spec.version}",
        f"fastmath={','.join(sorted(spec.fastmath))}",
        f"ir={ir_text}",
    ]


def cache_key(ir_text: str, spec: KernelSpec, target: Target, opts: OptOptions) -> str:
    """Hex sha256 of `key_material` (64 characters; file names use all of it, dumps the first 8)."""
    return _digest(key_material(ir_text, spec, target, opts))


def fast_key(spec: KernelSpec, target: Target, opts: OptOptions) -> str | None:
    """Key of the alias to ``spec``'s object, or None if the generator's source is unknown
    (defined interactively): then the IR is always rendered."""
    fingerprint = source_fingerprint(spec.build)
    if fingerprint is None:
        return None
    return _digest(_toolchain_fields(target, opts) + [f"alias-of={spec.identity()!r}",
                                                      f"sources={fingerprint}"])


def source_fingerprint(build) -> str | None:
    """sha256 of the generator's sources (`_fingerprint_dirs`)."""
    try:
        source = inspect.getsourcefile(build)
    except TypeError:
        source = None
    dirs = _fingerprint_dirs(source) if source is not None else None
    if dirs is None:
        return None
    return tree_digest(str(_PACKAGE_DIR), False) + "".join(tree_digest(d) for d in dirs)


@functools.lru_cache(maxsize=None)
def _fingerprint_dirs(source: str) -> tuple[str, ...] | None:
    """The folders whose sources (with the package's top-level modules: config, errors) key a
    generator defined in ``source`` (resolved once): the compiler's folder for one defined
    there -- every ``@kernel`` (its own module and helpers' are in its spec's ``source``) --
    the whole package for one elsewhere in it, the compiler's and its own folder for one
    outside. (The compiler's ~50 files, not the package's ~250: ~1.5 ms less warm start;
    `os.path`, not `pathlib`: ~0.05 ms less a source.)"""
    if not os.path.isfile(source):
        return None
    directory = os.path.dirname(os.path.realpath(source))
    for folder in (str(_COMPILE_DIR), str(_PACKAGE_DIR)):
        if directory == folder or directory.startswith(folder + os.sep):
            return (folder,)
    return (str(_COMPILE_DIR), directory)


def _digest(fields: list[str]) -> str:
    h = hashlib.sha256()
    for field in fields:
        h.update(field.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()
