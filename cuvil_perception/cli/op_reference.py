"""An op's declarations as the op reference shows them, shared by the ``ops`` tables
(`ops_cmd`) and the Markdown page ``ops --markdown`` writes (`ops_markdown`, docs/ops.md): the
one-line description, a param's default as a pipeline YAML writes it, and the ports with the
default params.
"""

from __future__ import annotations

from pathlib import Path

from ..graph.params import REQUIRED


def describe_ports(cls) -> tuple[tuple, tuple, bool]:
    """(input specs, output specs, variadic inputs) of ``cls`` with its default params."""
    op = cls({p.name: p.default for p in cls.params if not p.required}, {})
    return _safe(op.input_ports), _safe(op.output_ports), cls.variadic_inputs


def first_line(cls) -> str:
    """The first line of an op's doc (its one-line description)."""
    text = cls.doc or (cls.__doc__ or "").strip()
    return text.splitlines()[0] if text else ""


def show_default(param) -> str:
    """A default as the YAML would write it (a path as its text, not ``PosixPath(...)``)."""
    if param.default is REQUIRED:
        return "required"
    if param.default is None:
        return "null"
    if isinstance(param.default, bool):
        return "true" if param.default else "false"
    if isinstance(param.default, Path):
        return str(param.default)
    if isinstance(param.default, list):
        return "[" + ", ".join(f"{v:g}" if isinstance(v, float) else repr(v)
                               for v in param.default) + "]"
    return repr(param.default)


def _safe(declare) -> tuple:
    """Ports that depend on params without a default (or on wiring) cannot be listed: none."""
    try:
        return tuple(declare())
    except (KeyError, TypeError, ValueError):
        return ()
