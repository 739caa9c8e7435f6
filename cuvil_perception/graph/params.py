"""Op parameters: declared with a type and a default, checked when a pipeline is built."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REQUIRED = object()
# A path param "builtin:NAME" names a file shipped in cuvil_perception/models.
BUILTIN_PREFIX = "builtin:"

_TYPE_NAMES = {int: "integer", float: "number", str: "string", bool: "boolean", list: "list",
               dict: "mapping", Path: "path"}


@dataclass(frozen=True)
class Param:
    """A declared parameter of an op.

    ``type`` is one of int, float, str, bool, list, dict or Path (a string resolved relative to the
    pipeline file's folder). ``float`` accepts integers. ``choices`` restricts the value;
    ``optional`` allows ``None`` (YAML ``null``).
    """

    name: str
    type: type
    default: Any = REQUIRED
    doc: str = ""
    choices: tuple = ()
    optional: bool = False
    item_type: type | None = None  # element type of a list param
    length: int | None = None  # exact length of a list param

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def type_name(self) -> str:
        name = _TYPE_NAMES.get(self.type, self.type.__name__)
        if self.type is list and self.item_type is not None:
            name = f"list of {_TYPE_NAMES.get(self.item_type, self.item_type.__name__)}"
            if self.length is not None:
                name = f"{name} (length {self.length})"
        return name

    def coerce(self, value: Any, base_dir: Path | None) -> Any:
        """Return the checked value; raise ValueError with a reason when it does not fit."""
        if value is None:
            if self.optional or self.default is None:
                return None
            raise ValueError(f"must be {_article(self.type_name())}, got null")
        value = _coerce_scalar(self.type, value, self.type_name())
        if self.type is Path:
            if isinstance(value, str) and value.startswith(BUILTIN_PREFIX):
                return _builtin(value[len(BUILTIN_PREFIX):])
            path = Path(value).expanduser()
            if base_dir is not None and not path.is_absolute():
                path = base_dir / path
            value = Path(os.path.normpath(path))
        if self.type is list:
            if self.length is not None and len(value) != self.length:
                raise ValueError(f"must be {_article(self.type_name())}, got {len(value)} items")
            if self.item_type is not None:
                value = [_coerce_scalar(self.item_type, v, self.type_name()) for v in value]
        if self.choices and value not in self.choices:
            allowed = ", ".join(repr(c) for c in self.choices)
            raise ValueError(f"must be one of {allowed}, got {value!r}")
        return value


def _coerce_scalar(kind: type, value: Any, type_name: str) -> Any:
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"must be {_article(type_name)}, got {_describe(value)}")
        return float(value)
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be {_article(type_name)}, got {_describe(value)}")
        return value
    if kind is Path:
        if not isinstance(value, (str, Path)):
            raise ValueError(f"must be {_article(type_name)}, got {_describe(value)}")
        return value
    if not isinstance(value, kind):
        raise ValueError(f"must be {_article(type_name)}, got {_describe(value)}")
    return value


def _describe(value: Any) -> str:
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "mapping"}.get(type(value), type(value).__name__)
    return f"{kind} {value!r}"


def _article(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def builtin_models_dir() -> Path:
    """The folder of the models shipped with the package."""
    return Path(__file__).resolve().parents[1] / "models"


def _builtin(name: str) -> Path:
    path = builtin_models_dir() / name
    if not name or "/" in name or not path.is_file():
        shipped = ", ".join(sorted(p.name for p in builtin_models_dir().glob("*.onnx"))) or "none"
        raise ValueError(f"no bundled model '{name}' (bundled: {shipped})")
    return path
