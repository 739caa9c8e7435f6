"""The road the ego car drives along: a straight street along +x in the velodyne frame.

Cross-section in y (metres, + is left): a 3-lane road |y| <= 5.25 (lanes centred at -3.5 and 0
driving forward, +3.5 oncoming), bike strips 5.25..6.75, sidewalks 6.75..10, grass beyond.
Markings: solid edge lines at y = +-5.25 and +1.75, a dashed line (3 m dash, 6 m gap) at -1.75.
The ego car moves forward, so markings slide backwards by the distance travelled.
"""

from __future__ import annotations

import numpy as np

ASPHALT, MARKING, BIKE_STRIP, SIDEWALK, GRASS = 0, 1, 2, 3, 4
ROAD_HALF_WIDTH = 5.25
BIKE_OUTER = 6.75
SIDEWALK_OUTER = 10.0
LINE_HALF_WIDTH = 0.075
DASH, GAP = 3.0, 6.0

# material -> (BGR colour, LiDAR reflectance); texture and noise are added by the callers
COLOURS = np.array([[78, 80, 84], [215, 218, 220], [70, 75, 135], [150, 156, 162],
                    [60, 118, 72]], dtype=np.float64)
REFLECTANCE = np.array([0.12, 0.72, 0.16, 0.26, 0.18])


def material(x: np.ndarray, y: np.ndarray, travelled: float) -> np.ndarray:
    """Material id (int8, same shape as x) of the ground at (x, y) in the velodyne frame.

    ``travelled`` is how far (m) the ego car has driven since the start of the drive.
    """
    ay = np.abs(y)
    out = np.full(x.shape, GRASS, dtype=np.int8)
    out[ay < SIDEWALK_OUTER] = SIDEWALK
    out[ay < BIKE_OUTER] = BIKE_STRIP
    out[ay < ROAD_HALF_WIDTH + LINE_HALF_WIDTH] = ASPHALT
    solid = (np.abs(ay - ROAD_HALF_WIDTH) < LINE_HALF_WIDTH) | (np.abs(y - 1.75) < LINE_HALF_WIDTH)
    phase = np.mod(x + travelled, DASH + GAP)
    dashed = (np.abs(y + 1.75) < LINE_HALF_WIDTH) & (phase < DASH)
    out[solid | dashed] = MARKING
    return out


def texture(x: np.ndarray, y: np.ndarray, travelled: float, phases: np.ndarray) -> np.ndarray:
    """Smooth brightness variation in [-1, 1] at ground point (x, y): a sum of a few sines in
    world coordinates (so it moves with the road), with seeded ``phases`` [4]."""
    wx = x + travelled
    return 0.5 * (np.sin(0.9 * wx + 0.4 * y + phases[0]) * np.sin(0.35 * y - 0.2 * wx + phases[1])
                  + 0.5 * np.sin(2.3 * wx + phases[2]) * np.sin(1.7 * y + phases[3]))
