"""Generate the training and validation drives with the project's synthetic drive generator.

    python training/make_data.py --out training/data --train-drives 8 --val-drives 2 --frames 100

Writes ``OUT/train/seed_<s>`` and ``OUT/val/seed_<s>`` (KITTI raw layout with the label
sidecar, see docs/drive-format.md). Training seeds are ``--seed + k``; validation seeds start
at ``--seed + 1000`` so the two sets never share a scene. ``OUT/manifest.json`` records seeds,
frame counts, bytes and generation times (copied into the model card).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cuvil_perception.drives.synth import make_drive

VAL_SEED_OFFSET = 1000


def generate(out: Path, split: str, seeds: list[int], frames: int) -> list[dict]:
    rows = []
    for seed in seeds:
        target = out / split / f"seed_{seed}"
        if (target / "velodyne_points" / "timestamps.txt").is_file():
            print(f"{target}: exists, kept", flush=True)
            rows.append({"path": str(target), "seed": seed, "frames": frames, "reused": True})
            continue
        summary = make_drive(target, frames, seed)
        print(f"{target}: {summary.frames} frames, {summary.bytes / 1e6:.0f} MB, "
              f"{summary.seconds:.0f} s", flush=True)
        rows.append({"path": str(target), "seed": seed, "frames": summary.frames,
                     "bytes": summary.bytes, "seconds": round(summary.seconds, 1)})
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("training/data"))
    ap.add_argument("--train-drives", type=int, default=8)
    ap.add_argument("--val-drives", type=int, default=2)
    ap.add_argument("--frames", type=int, default=100, help="frames per drive (10 Hz)")
    ap.add_argument("--seed", type=int, default=100, help="first training seed")
    args = ap.parse_args(argv)
    if args.train_drives < 1 or args.val_drives < 1 or args.frames < 1:
        ap.error("--train-drives, --val-drives and --frames must be at least 1")
    began = time.perf_counter()
    train = generate(args.out, "train", [args.seed + k for k in range(args.train_drives)],
                     args.frames)
    val = generate(args.out, "val", [args.seed + VAL_SEED_OFFSET + k
                                     for k in range(args.val_drives)], args.frames)
    manifest = {"generator": "cuvil_perception.drives.synth.make_drive", "train": train,
                "val": val, "seconds": round(time.perf_counter() - began, 1),
                "command": " ".join(sys.argv)}
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"manifest: {args.out / 'manifest.json'}")


if __name__ == "__main__":
    main()
