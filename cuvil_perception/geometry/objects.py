"""The fused-object row: float32 [N, 15], one row per object seen by the camera, the LiDAR or
both; what ``fusion.associate`` writes (the ``objects`` role, `graph.roles`) and eval, viz and
the MCAP sink read.

Columns (``COLUMNS``, and the index or slice of each group):

* ``CLASS`` 0: class index, 0-based, as float;
* ``BOX_3D`` 1:8: x, y, z, dx, dy, dz, heading (LiDAR frame, m, rad); NaN when the LiDAR did
  not see the object;
* ``BOX_2D`` 8:12: x1, y1, x2, y2 (image pixels); NaN when the camera did not see it and the
  3D box does not project into the image;
* ``SCORE_3D`` 12, ``SCORE_2D`` 13: each sensor's score, NaN for a sensor that did not see it;
* ``SEEN_BY`` 14: bitmask ``SEEN_CAMERA`` | ``SEEN_LIDAR``.
"""

COLUMNS = ("class", "x", "y", "z", "dx", "dy", "dz", "heading", "x1", "y1", "x2", "y2",
           "score_3d", "score_2d", "seen_by")
CLASS, BOX_3D, BOX_2D, SCORE_3D, SCORE_2D, SEEN_BY = 0, slice(1, 8), slice(8, 12), 12, 13, 14
SEEN_CAMERA, SEEN_LIDAR = 1, 2
