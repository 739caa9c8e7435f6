"""The warm-start path as it was before the issue-12 warm-start work, for side-by-side runs in
`compile.py` (fresh processes) only; nothing in the package can switch to it.

Then: the package fingerprint walked the tree with ``Path.rglob`` and hashed every file's bytes
into one digest (no per-file memo shared with the kernels' source digests); a kernel-language
spec's source digest found files with ``inspect.getsourcefile`` + ``Path.resolve``, one level of
helpers deep, and read the static defaults through ``inspect.signature``; every LLVM target was
registered for host code too; prewarm loaded each cache hit into an engine of its own.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import types
from pathlib import Path


def install() -> None:
    """Patch the current process onto the old warm-start path (call before building specs)."""
    from cuvil_perception.compile import kernel_prewarm, keys, registry, target

    every = target.ensure_llvm
    target.ensure_llvm = lambda every_target=True: every(True)
    kernel_module = sys.modules["cuvil_perception.compile.lang.kernel"]
    keys.tree_digest = _tree_digest
    kernel_module._digest_sources = _digest_sources
    kernel_module.Kernel._defaults = _defaults
    kernel_prewarm.acquire_all = lambda specs: [registry.acquire(spec) for spec in specs]


_TREES: dict[str, str] = {}
_FILES: dict[Path, bytes] = {}


def _tree_digest(directory: str) -> str:
    if directory not in _TREES:
        root = Path(directory)
        h = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode("utf-8"))
            h.update(path.read_bytes())
        _TREES[directory] = h.hexdigest()[:32]
    return _TREES[directory]


def _defaults(self) -> dict:
    sig = inspect.signature(self.py_func)
    return {p.name: p.default for p in sig.parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.default is not p.empty}


def _digest_sources(fn) -> str:
    files = set()
    module = sys.modules.get(fn.__module__)
    for obj in [fn, *(vars(module).values() if module else ())]:
        target = getattr(obj, "__cuvil_kernel__", None)
        target = target.py_func if target is not None else obj
        if obj is fn or getattr(target, "__cuvil_inline__", False) or \
                hasattr(obj, "__cuvil_kernel__") or isinstance(obj, types.ModuleType):
            path = _file_of(target)
            if path is not None:
                files.add(path)
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(str(path).encode())
        if path not in _FILES:
            _FILES[path] = hashlib.sha256(path.read_bytes()).digest()
        h.update(_FILES[path])
    return h.hexdigest()[:24]


_SYSTEM = tuple(str(Path(p).resolve()) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})


def _file_of(obj) -> Path | None:
    try:
        name = inspect.getsourcefile(obj)
    except TypeError:
        return None
    if not name:
        return None
    path = Path(name).resolve()
    if str(path).startswith(_SYSTEM) or "site-packages" in path.parts or not path.is_file():
        return None
    return path
