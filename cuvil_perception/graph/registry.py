"""The registry that names ops: ``register`` fills it, ``lookup`` and ``registered`` read it.

The first read loads the ``cuvil_perception.ops`` entry points (built-in and third-party ops
alike: `plugins`), whose modules call ``register``; a stage may also name its op by import path
``package.module:Class``, resolved and registered on first use. The op contract itself is
`op`; nothing there imports this module, so the contract, the registry and the loading form no
import circle.
"""

from __future__ import annotations

from pathlib import Path

from . import plugins
from .op import TAGS, Op

_REGISTRY: dict[str, type[Op]] = {}


def register(cls: type[Op]) -> type[Op]:
    """Class decorator: make an op available to pipelines under ``cls.name``."""
    if not cls.name:
        raise TypeError(f"{cls.__qualname__} has no name")
    if cls.tag not in TAGS:
        raise TypeError(f"{cls.__qualname__}.tag must be one of {TAGS}")
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing is not cls:
        raise TypeError(f"op name {cls.name!r} is already taken by {existing.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def lookup(name: str, base_dir: Path | None = None) -> type[Op] | None:
    """The op registered as ``name``, or the class at import path ``package.module:Class``
    (raises `plugins.OpImportError` saying why it cannot be imported); None if unknown."""
    _load_builtin_ops()
    if ":" in name:
        return plugins.resolve_path(name, register, base_dir)
    return _REGISTRY.get(name)


def registered() -> dict[str, type[Op]]:
    """Every registered op by name, sorted (the entry points loaded first)."""
    _load_builtin_ops()
    return dict(sorted(_REGISTRY.items()))


_loaded = False


def _load_builtin_ops() -> None:
    """Load the op entry points once (built-in ops are entry points too: see `plugins`)."""
    global _loaded
    if not _loaded:
        _loaded = True
        plugins.load_entry_points(register)
