"""Op parameters: declared with a type, a default and the values that make sense, checked when
a pipeline is built (before anything is opened or allocated).

Every numeric value (an ``int`` or ``float`` param, or each item of a list of numbers) is
checked the same way, so no op has to repeat it:

* a float must be finite (NaN and infinities are refused: ``nms_threshold: .nan`` would
  silently disable NMS, a NaN heading would give NaN boxes);
* ``range=Range(low, high)`` bounds it (each end inclusive or open); ``unit`` names its unit;
* ``bytes_each`` says the op preallocates ``value * bytes_each`` bytes of static buffers: the
  value is refused with the memory it would take when that passes `MAX_STATIC_BYTES`;
* ``min_items`` / ``length`` bound a list's length (``camera_classes: []`` is not "identity").

``Param.constraint()`` renders these rules for ``cuvil-perception ops NAME`` and the docs, from
the same declaration the check uses.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REQUIRED = object()
# A path param "builtin:NAME" names a file shipped in cuvil_perception/models.
BUILTIN_PREFIX = "builtin:"

# Static buffers one stage may preallocate through a size param (max_pillars, ...): 2 GiB.
MAX_STATIC_BYTES = 2 << 30

_TYPE_NAMES = {int: "integer", float: "number", str: "string", bool: "boolean", list: "list",
               dict: "mapping", Path: "path"}


@dataclass(frozen=True)
class Range:
    """Allowed interval of a number: ``low``/``high`` (None: unbounded), each end inclusive
    unless ``low_open``/``high_open``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return False
        return True

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return (f"{'(' if self.low_open else '['}{_num(self.low)}, {_num(self.high)}"
                    f"{')' if self.high_open else ']'}")
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {_num(self.low)}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {_num(self.high)}"
        return "any finite value"


def _num(value: float) -> str:
    """A number for a message: %g for floats, integers in full unless absurdly long."""
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    return text if len(text) <= 24 else f"{text[:8]}...({len(text)} digits)"


@dataclass(frozen=True)
class Param:
    """A declared parameter of an op.

    ``type`` is one of int, float, str, bool, list, dict or Path (a string resolved relative to the
    pipeline file's folder). ``float`` accepts integers. ``choices`` restricts the value;
    ``optional`` allows ``None`` (YAML ``null``). ``range``, ``unit``, ``bytes_each`` and
    ``min_items`` are the value checks described in the module docstring; a numeric param (or a
    list of numbers) must declare a ``range`` (the test suite enforces it).
    """

    name: str
    type: type
    default: Any = REQUIRED
    doc: str = ""
    choices: tuple = ()
    optional: bool = False
    item_type: type | None = None  # element type of a list param
    length: int | None = None  # exact length of a list param
    range: Range | None = None  # allowed values of a number, or of each item of a list
    unit: str = ""  # unit of the number(s), shown with the range
    bytes_each: int = 0  # static bytes preallocated per unit of the value (capped)
    min_items: int = 0  # shortest allowed list
    must_exist: bool = False  # a Path that must exist before the run (an input, not an output)

    @property
    def numeric(self) -> bool:
        """True for an int/float param or a list of ints/floats."""
        kind = self.item_type if self.type is list else self.type
        return kind in (int, float)

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

    def constraint(self) -> str:
        """The allowed values in words (empty when only the type restricts them)."""
        parts = []
        if self.choices:
            parts.append("one of " + ", ".join(map(repr, self.choices)))
        if self.numeric:
            unit = f" {self.unit}" if self.unit else ""
            each = "each " if self.type is list else ""
            parts.append(f"{each}{self.range or Range()}{unit}")
        if self.bytes_each:
            parts.append(f"at most {self.max_value():,} ({_size(MAX_STATIC_BYTES)} of static "
                         f"buffers at {self.bytes_each:,} B each)")
        if self.min_items:
            parts.append(f"at least {self.min_items} item{'s' * (self.min_items > 1)}")
        if self.must_exist:
            parts.append("an existing file")
        return "; ".join(parts)

    def max_value(self) -> int:
        """Largest value `bytes_each` allows."""
        return MAX_STATIC_BYTES // self.bytes_each

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
            if len(value) < self.min_items:
                raise ValueError(f"must have at least {self.min_items} item"
                                 f"{'s' * (self.min_items > 1)}, got {len(value)}")
            if self.item_type is not None:
                value = [_coerce_scalar(self.item_type, v, self.type_name()) for v in value]
                for index, item in enumerate(value):
                    self._check_number(item, f"item {index} ")
        elif self.type in (int, float):
            self._check_number(value, "")
        if self.choices and value not in self.choices:
            allowed = ", ".join(repr(c) for c in self.choices)
            raise ValueError(f"must be one of {allowed}, got {value!r}")
        return value

    def _check_number(self, value: Any, what: str) -> None:
        if not isinstance(value, (int, float)):
            return
        unit = f" {self.unit}" if self.unit else ""
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{what}must be a finite number"
                             f"{f' ({self.unit})' if self.unit else ''}, got {value!r}")
        if self.range is not None and not self.range.contains(value):
            interval = "in " if self.range.low is not None and self.range.high is not None else ""
            raise ValueError(f"{what}must be {interval}{self.range}{unit}, got {_num(value)}")
        if self.bytes_each and value > self.max_value():
            raise ValueError(f"{what}{_num(value)} would preallocate "
                             f"{_size(value * self.bytes_each)} of static buffers "
                             f"({self.bytes_each:,} B each); the limit is "
                             f"{_size(MAX_STATIC_BYTES)}, at most {self.max_value():,}")


def _size(nbytes: float) -> str:
    """1.5 GiB, 4.66 TiB, ... (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} PiB"


def _coerce_scalar(kind: type, value: Any, type_name: str) -> Any:
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"must be {_article(type_name)}, got {_describe(value)}")
        try:
            return float(value)
        except OverflowError:  # a 400-digit integer
            raise ValueError(f"must be a finite number, got an integer of {len(str(value))} "
                             f"digits") from None
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be {_article(type_name)}, got {_describe(value)}")
        return value
    if kind is Path:
        if not isinstance(value, (str, Path)):
            raise ValueError(f"must be {_article(type_name)}, got {_describe(value)}")
        if isinstance(value, str) and not value.strip():  # '' would mean the YAML's folder
            raise ValueError(f"must be {_article(type_name)}, got an empty string")
        return value
    if not isinstance(value, kind):
        raise ValueError(f"must be {_article(type_name)}, got {_describe(value)}")
    return value


def _describe(value: Any) -> str:
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "mapping"}.get(type(value), type(value).__name__)
    text = _num(value) if type(value) is int else repr(value)
    return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


def _article(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def builtin_models_dir() -> Path:
    """The folder of the models shipped with the package."""
    return Path(__file__).resolve().parents[1] / "models"


def model_file(value: str, what: str) -> Path:
    """The model file a command-line option names: a path, or ``builtin:NAME`` (a model shipped in
    cuvil_perception/models, as in a ``model:`` param). UsageError starting with ``what`` (the
    option and its value) when there is no such file; every CLI option taking a model uses it."""
    from ..errors import UsageError

    if value.startswith(BUILTIN_PREFIX):
        try:
            return _builtin(value[len(BUILTIN_PREFIX):])
        except ValueError as exc:
            raise UsageError(f"{what}: {exc}") from None
    path = Path(value).expanduser()
    if not path.is_file():
        raise UsageError(f"{what}: {path}: no such model file")
    return path


def _builtin(name: str) -> Path:
    path = builtin_models_dir() / name
    if not name or "/" in name or not path.is_file():
        shipped = ", ".join(sorted(p.name for p in builtin_models_dir().glob("*.onnx"))) or "none"
        raise ValueError(f"no bundled model '{name}' (bundled: {shipped})")
    return path
