"""Explicit memory vocabulary for what auto-vectorisation does not produce on its own:
``from cuvil_perception.compile.lang import simd``.

Indices are *flat* element indices into the buffer (row-major), ``n`` a compile-time int.

==============================  =============================================================
call                            compiled as
==============================  =============================================================
``simd.fill(buf, at, n, v)``    one ``<n x T>`` store of ``v`` in every lane (16 f32 zeros =
                                one 64-byte store)
``simd.copy(dst, at, src,       one ``<n x T>`` load and one store (element-aligned, so any
from_, n)``                     numpy view is fine)
``simd.stream_fill(...)``,      the same with ``!nontemporal`` stores (whole cache lines
``simd.stream_copy(...)``       written without a read for ownership); end with ``fence()``.
                                The destination must be aligned to the whole vector
                                (``n`` x the element size: 64 bytes for 16 f32)
``simd.fence()``                a seq_cst fence (orders streaming stores before later loads)
``simd.prefetch(buf, at)``      ``llvm.prefetch`` for writing, all cache levels (a hint: the
                                address may lie past the buffer, it never faults)
==============================  =============================================================

Uncompiled, each is the numpy slice operation it stands for (``prefetch``/``fence`` do nothing).
A bounds-checked build checks ``[at, at + n)`` against the buffer's size when it is known.
"""

from __future__ import annotations

import numpy as np


def fill(buf: np.ndarray, at: int, n: int, value) -> None:
    buf.reshape(-1)[at:at + n] = value


def copy(dst: np.ndarray, at: int, src: np.ndarray, from_: int, n: int) -> None:
    dst.reshape(-1)[at:at + n] = src.reshape(-1)[from_:from_ + n]


def stream_fill(buf: np.ndarray, at: int, n: int, value) -> None:
    fill(buf, at, n, value)


def stream_copy(dst: np.ndarray, at: int, src: np.ndarray, from_: int, n: int) -> None:
    copy(dst, at, src, from_, n)


def fence() -> None:
    """Nothing to order in plain Python."""


def prefetch(buf: np.ndarray, at: int) -> None:
    """A hint only."""


OPERATIONS = {fill: "fill", copy: "copy", stream_fill: "stream_fill",
              stream_copy: "stream_copy", fence: "fence", prefetch: "prefetch"}
