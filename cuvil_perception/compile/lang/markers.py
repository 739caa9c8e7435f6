"""Role markers: what a kernel's annotation says of a run-time argument beyond its type.

The last item of a parameter's brackets says what the kernel does with the argument and what it
holds, for the kernel's documented signature (its spec's `Arg` list, from which ``compile
--library`` writes the C header, the ABI checks and the manifest)::

    @kernel(name="pillars.pfn")
    def pfn(voxels: Buf[f32, None, "max_points", 4, In("m (x, y, z); reflectance",
                                                        "pillarize's voxels", rows="count")],
            count: i64[In("pillars", "pillars to compute")],
            out: Buf[f32, None, "channels", Out(doc="pillar features", rows="count")], *,
            channels: int, max_points: int): ...

``In``, ``Out``, ``InOut``, ``State`` (kept between calls) and ``Scratch`` (any content) take
``(unit, doc)``, the unit the values measure (``"m"``, ``"cells"``) and one line of meaning, and
by keyword:

- ``rows``: the size of a buffer's open first extent (``None`` in the annotation), e.g.
  ``rows="count"``: "at least ``count`` rows" (the kernel language checks extents exactly, so an
  extent that only bounds the rows the kernel touches is stated here);
- ``shape``: the documented shape when the annotation cannot state it: a flat buffer the kernel
  indexes by hand (``shape=("channels", "ny", "nx")``) or an extent that is an expression over
  the static params and scalar arguments (``shape=("max_pillars * max_points + 4", 4)``);
- ``most``: for an int scalar, the largest value the kernel accepts (an int or an expression
  over the static params); a library's entry point returns its range error above it;
- ``dtype``: the element type a C caller sees, when the kernel reads the same bits through
  another type of the same size (scatter's bitmap: u64 words annotated ``i64`` so that the
  uncompiled function computes as the compiled one).

A scalar takes only ``In`` (``count: i64[In("pillars")]``). A parameter without a marker is
documented from its type alone: role ``inout`` for a buffer (``in``, and ``const`` in C, when
the kernel never writes it), ``in`` for a scalar. The markers change nothing in the compiled code
or a spec's identity.
"""

from __future__ import annotations

from dataclasses import dataclass

#: a role marker's name -> the `spec.ROLES` value it declares.
_ROLES = {"In": "in", "Out": "out", "InOut": "inout", "State": "state", "Scratch": "scratch"}
_MARKERS = {role: name for name, role in _ROLES.items()}


@dataclass(frozen=True)
class Role:
    """One role marker (see the module docstring); made by `In`, `Out`, `InOut`, `State`,
    `Scratch`."""

    role: str
    unit: str = ""
    doc: str = ""
    rows: str | int | None = None
    shape: tuple | None = None
    most: str | int | None = None
    dtype: str | None = None

    def __post_init__(self) -> None:
        marker = _MARKERS.get(self.role)
        if marker is None:
            raise TypeError(f"role {self.role!r}: use one of In, Out, InOut, State, Scratch")
        for field in ("unit", "doc"):
            if not isinstance(getattr(self, field), str):
                raise TypeError(f"{marker}(...): {field} must be a string, got "
                                f"{getattr(self, field)!r}")
        if self.rows is not None and not isinstance(self.rows, (str, int)):
            raise TypeError(f"{marker}(rows=...): an int or an expression, got {self.rows!r}")
        if self.shape is not None:
            if not isinstance(self.shape, tuple) or not self.shape or \
                    not all(isinstance(d, (str, int)) for d in self.shape):
                raise TypeError(f"{marker}(shape=...): a tuple of ints and expressions, got "
                                f"{self.shape!r}")
            if self.rows is not None:
                raise TypeError(f"{marker}(...): give rows or shape, not both")
        if self.most is not None and not isinstance(self.most, (str, int)):
            raise TypeError(f"{marker}(most=...): an int or an expression, got {self.most!r}")
        if self.dtype is not None and not isinstance(self.dtype, str):
            raise TypeError(f"{marker}(dtype=...): a type name such as \"u64\", got "
                            f"{self.dtype!r}")


    def __repr__(self) -> str:
        items = [repr(self.unit)] if self.unit else []
        if self.doc:
            items.append(repr(self.doc) if self.unit else f"doc={self.doc!r}")
        items += [f"{k}={getattr(self, k)!r}" for k in ("rows", "shape", "most", "dtype")
                  if getattr(self, k) is not None]
        return f"{_MARKERS[self.role]}({', '.join(items)})"


def _marker(name: str):
    def make(unit: str = "", doc: str = "", *, rows=None, shape=None, most=None,
             dtype=None) -> Role:
        return Role(_ROLES[name], unit, doc, rows, shape, most, dtype)
    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"The ``{_ROLES[name]}`` role marker (see `markers`)."
    return make


In, Out, InOut, State, Scratch = (_marker(n) for n in _ROLES)


@dataclass(frozen=True)
class Marked:
    """A parameter type with its role marker: what ``Buf[..., In(...)]`` and ``i64[In(...)]``
    evaluate to; `split` takes it apart."""

    ty: object
    role: Role


def split(annotation) -> tuple[object, Role | None]:
    """(the type, its role marker or None) of a parameter's annotation."""
    if isinstance(annotation, Marked):
        return annotation.ty, annotation.role
    return annotation, None
