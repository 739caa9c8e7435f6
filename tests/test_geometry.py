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


def test_eval_and_viz_import_nothing_from_ops() -> None:
    """Geometry and the fused-object row layout come from the geometry package."""
    for folder in ("eval", "viz"):
        for path in (PACKAGE / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    module = (node.module or "").removeprefix("cuvil_perception.")
                    assert not module.startswith("ops"), (path.name, node.lineno, module)
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names
                             if a.name.startswith("cuvil_perception.ops")]
                    assert not names, (path.name, node.lineno, names)
    assert not (PACKAGE / "ops" / "pillars" / "bev_iou.py").exists()


def test_fused_rows_have_one_layout() -> None:
    from cuvil_perception.eval.scoring import fused_as_2d, fused_as_bev
    from cuvil_perception.geometry import objects as O

    assert fusion.COLUMNS is O.COLUMNS and fusion.SEEN_CAMERA is O.SEEN_CAMERA
    assert O.COLUMNS[O.BOX_3D] == ("x", "y", "z", "dx", "dy", "dz", "heading")
    assert O.COLUMNS[O.BOX_2D] == ("x1", "y1", "x2", "y2")
    assert [O.COLUMNS[k] for k in (O.CLASS, O.SCORE_3D, O.SCORE_2D, O.SEEN_BY)] == \
        ["class", "score_3d", "score_2d", "seen_by"]
    row = np.arange(15, dtype=np.float32)[None]  # class 0, box 1..7, image box 8..11, scores
    assert fused_as_2d(row).tolist() == [[8, 9, 10, 11, 13, 0]]  # the larger score
    boxes, scores, classes = fused_as_bev(row)
    assert boxes.tolist() == [[1, 2, 3, 4, 5, 6, 7]] and scores.tolist() == [12]
    assert classes.tolist() == [0]


def test_fusion_uses_the_shared_functions() -> None:
    assert fusion.project_boxes is geometry.project_boxes
    assert fusion.iou_matrix is geometry.iou_matrix
    boxes = np.array([[10.0, 1.0, -0.5, 4.0, 1.8, 1.5, 0.3]])
    corners = geometry.box_corners(boxes)
    assert corners.shape == (1, 8, 3) and corners.dtype == np.float64
    assert np.allclose(corners.mean(axis=1), boxes[:, :3])
