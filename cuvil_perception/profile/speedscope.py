"""Stacks as a speedscope file (https://www.speedscope.app/file-format-schema.json): one
"sampled" profile per thread, weights in milliseconds of sampled time, frames shared."""

from __future__ import annotations

import json

from .stacks import Stacks

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def to_speedscope(stacks: Stacks, name: str) -> str:
    """The JSON text: profiles in the order of `Stacks.threads` (busiest first), each sample
    a stack of indices into ``shared.frames`` (root first), weight = count / rate in ms."""
    index: dict[str, int] = {}
    frames: list[dict] = []

    def frame_id(frame: str) -> int:
        if frame not in index:
            index[frame] = len(frames)
            frames.append({"name": frame})
        return index[frame]

    profiles = []
    ms = 1000.0 / stacks.rate_hz
    for thread in stacks.threads():
        own = stacks.thread(thread)
        samples, weights = [], []
        for stack, count in sorted(own.counts.items()):
            samples.append([frame_id(f) for f in stack])
            weights.append(round(count * ms, 6))
        total = round(sum(weights), 6)
        profiles.append({"type": "sampled", "name": thread, "unit": "milliseconds",
                         "startValue": 0, "endValue": total, "samples": samples,
                         "weights": weights})
    return json.dumps({"$schema": SCHEMA, "name": name, "exporter": "cuvil-perception profile",
                       "activeProfileIndex": 0, "shared": {"frames": frames},
                       "profiles": profiles}, indent=None) + "\n"
