"""Short human summaries of detection outputs, for the ops' ``summarize`` hooks (``run --summary``)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def count_by_class(classes: np.ndarray, names: Sequence[str] = ()) -> str:
    """``"3 car, 1 pedestrian"`` for an array of class ids; ids without a name read ``class 7``."""
    classes = np.asarray(classes, dtype=np.float64)
    ids, counts = np.unique(classes[np.isfinite(classes)].astype(np.int64), return_counts=True)
    return ", ".join(f"{n} {names[i] if 0 <= i < len(names) else f'class {i}'}"
                     for i, n in zip(ids.tolist(), counts.tolist()))
