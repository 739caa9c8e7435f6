"""The geometry package is a leaf that eval and viz take their geometry from (not from ops)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from cuvil_perception import geometry
from cuvil_perception.ops import fusion

PACKAGE = Path(__file__).resolve().parents[1] / "cuvil_perception"


def imported_modules(path: Path) -> set[str]:
    """Absolute or relative (leading dots kept) module names ``path`` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


def test_geometry_imports_only_numpy_and_itself() -> None:
    for path in (PACKAGE / "geometry").glob("*.py"):
        outside = {m for m in imported_modules(path)
                   if m not in ("__future__", "numpy") and not m.startswith(".")
                   or m.startswith("..")}
        assert not outside, (path.name, outside)


def test_eval_and_viz_take_geometry_from_the_geometry_package() -> None:
    shared = set(geometry.__all__) | {"TABLE_WIDTH", "AREA", "CORNERS", "EPS", "RADIUS"}
    for folder in ("eval", "viz"):
        for path in (PACKAGE / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ops"):
                    names = {alias.name for alias in node.names}
                    assert not names & shared, (path.name, node.module, names & shared)
    assert not (PACKAGE / "ops" / "pillars" / "bev_iou.py").exists()


def test_fusion_uses_the_shared_functions() -> None:
    assert fusion.project_boxes is geometry.project_boxes
    assert fusion.iou_matrix is geometry.iou_matrix
    boxes = np.array([[10.0, 1.0, -0.5, 4.0, 1.8, 1.5, 0.3]])
    corners = geometry.box_corners(boxes)
    assert corners.shape == (1, 8, 3) and corners.dtype == np.float64
    assert np.allclose(corners.mean(axis=1), boxes[:, :3])
