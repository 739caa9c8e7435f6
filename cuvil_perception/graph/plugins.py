"""Where ops come from: the ``cuvil_perception.ops`` entry-point group, and import paths.

Every op, built-in or third-party, reaches the registry the same way: a distribution declares
entry points in the group ``cuvil_perception.ops`` (this package declares one per op module in
its pyproject.toml), and loading an entry point imports its module, whose ``@register``
decorators fill the registry; an entry point may also name an `Op` subclass directly
(``myops = "my_pkg.ops:GroundRemoval"``), which is then registered. So graph/ never imports
ops/. A third-party plugin that fails to import is skipped with a warning naming the entry
point, so one broken package does not take every pipeline down; a built-in one is a bug and
raises.

A stage may also name its op by import path, ``op: my_pkg.ops:GroundRemoval``, with no
installation step: the module is imported (first from ``sys.path``, then from the pipeline
file's directory) and the class registered under its ``name``. Importing a module runs its
code, as ``python -c "import my_pkg.ops"`` would, in every verb that reads the pipeline
(``inspect`` and ``compile`` too): name only modules you trust. A module whose code raises or
calls ``sys.exit`` while importing is an `OpImportError` naming it (exit 2 through the CLI).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from importlib import metadata
from pathlib import Path

from ..errors import UsageError
from .op import Op

GROUP = "cuvil_perception.ops"

class OpImportError(LookupError):
    """``package.module:Class`` could not be resolved to an op; the message says why."""


def _builtin(ep) -> bool:
    return ep.value.startswith("cuvil_perception.")


def load_entry_points(register) -> list[str]:
    """Load every entry point of the group; returns their names. The built-in ops are entry
    points too (pyproject.toml lists them: the one list); none of them means a stale install
    (a UsageError saying how to fix it), one that fails to import is a bug (raised)."""
    found = list(metadata.entry_points(group=GROUP))
    if not any(_builtin(ep) for ep in found):
        raise UsageError("the installed cuvil-perception declares no built-in ops (entry "
                         f"points of group {GROUP!r}): its metadata predates them; reinstall "
                         "it (make setup, or pip install -e .)")
    for ep in found:
        try:
            obj = ep.load()
        except (Exception, SystemExit) as exc:
            if _builtin(ep):  # ours: a bug, with its traceback
                raise
            # a broken third-party plugin: warn, keep the
            # others (one that calls sys.exit while importing must not end the command)
            warnings.warn(f"op plugin '{ep.name}' ({ep.value}) failed to load: "
                          f"{type(exc).__name__}: {exc}", stacklevel=3)
            continue
        if isinstance(obj, type):
            _register_class(obj, ep.value, register)
    return [ep.name for ep in found]


def resolve_path(path: str, register, base_dir: Path | None = None):
    """The op class named ``package.module:Class`` (imported, checked, registered)."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr or not all(p.isidentifier() for p in
                                               module_name.split(".") + attr.split(".")):
        raise OpImportError(f"'{path}' is not an import path; write package.module:Class")
    module = _import(module_name, base_dir)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise OpImportError(f"module '{module_name}' has no attribute '{attr}'")
    return _register_class(obj, path, register)


def _import(module_name: str, base_dir: Path | None):
    try:
        return _run_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if base_dir is None or not module_name.startswith(missing.split(".")[0]):
            raise OpImportError(f"cannot import '{module_name}': {exc}") from None
    sys.path.insert(0, str(base_dir))  # the pipeline file's directory, for this import only
    try:
        return _run_module(module_name)
    except ImportError as exc:
        raise OpImportError(f"cannot import '{module_name}' (also looked in {base_dir}): "
                            f"{exc}") from None
    finally:
        sys.path.remove(str(base_dir))


def _run_module(module_name: str):
    """Import ``module_name``, which runs its code (in ``inspect`` too): what that code does
    besides failing to find a module (raise, ``sys.exit``) is an `OpImportError` naming the
    module, never a silent exit or a traceback."""
    try:
        return importlib.import_module(module_name)
    except ImportError:
        raise
    except SystemExit as exc:
        raise OpImportError(f"importing '{module_name}' ran its code, which called "
                            f"sys.exit({exc.code!r}); an op module must not exit") from None
    except Exception as exc:  # the module itself raised while importing
        raise OpImportError(f"importing '{module_name}' failed: its code raised "
                            f"{type(exc).__name__}: {exc}") from None


def _register_class(obj, where: str, register):
    if not (isinstance(obj, type) and issubclass(obj, Op)):
        raise OpImportError(f"'{where}' is not an Op subclass")
    try:
        return register(obj)
    except TypeError as exc:  # no name, bad tag, or a name another op already has
        raise OpImportError(f"'{where}': {exc}") from None
