"""``cuvil-perception quantize MODEL.onnx --calibrate DRIVE [--out MODEL.int8.onnx]``: static INT8.

Quantises the network the detector op runs in ONNX Runtime (YOLOv8 trunk, PointPillars BEV part)
with QDQ nodes, calibrated on frames of DRIVE through the op's own pre-processing, and writes a
model of the same layout: put it in a pipeline's ``model:`` param. ``eval --compare-model``
measures what it costs in AP and gains in speed. Exit codes: 0 done, 2 usage error.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from ..graph.params import model_file
from .progress import counter


def default_out(model: Path) -> Path:
    """MODEL.onnx -> MODEL.int8.onnx beside it."""
    return model.with_name(f"{model.stem}.int8{model.suffix or '.onnx'}")


@click.command("quantize")
@click.argument("model", metavar="MODEL.onnx")
@click.option("--calibrate", "drive", metavar="DRIVE", required=True,
              help="Drive whose frames calibrate the activation ranges (use one the model was "
                   "not trained on).")
@click.option("--out", metavar="FILE.onnx", help="Where to write [default: MODEL.int8.onnx].")
@click.option("--frames", type=click.IntRange(1, 10_000), default=32, show_default=True,
              help="Calibration frames, spread evenly over the drive.")
@click.option("--overwrite", is_flag=True,
              help="Let --out replace an existing file cuvil-perception did not write.")
def quantize_cmd(model: str, drive: str, out: str | None, frames: int, overwrite: bool) -> None:
    """Write an INT8 (QDQ) version of a detector model: a YOLOv8 detect export or a
    CUDA-PointPillars model, calibrated on DRIVE."""
    from ..output_files import write_bytes_atomic
    from ..quantize import quantize_model
    from ..rt import Claim, check_outputs

    source = model_file(model, f"MODEL {model}")
    target = Path(out) if out else default_out(source)
    if not Path(drive).is_dir():
        raise UsageError(f"--calibrate {drive}: no such drive folder")
    check_outputs([Claim("--out", target)],
                  [Claim("MODEL", source), Claim("--calibrate drive", Path(drive), folder=True)],
                  overwrite=overwrite)

    with counter("calibrating: frame") as progress:
        data, summary = quantize_model(source, Path(drive), frames, progress)
    write_bytes_atomic(target, data)
    click.echo(f"{summary.kind}: {summary.quantized_nodes} DequantizeLinear nodes (QDQ), "
               f"{summary.float_nodes} nodes kept in float, calibrated on {summary.frames} "
               f"frame(s) of {drive}; {summary.bytes_in / 1e6:.2f} MB -> "
               f"{summary.bytes_out / 1e6:.2f} MB")
    click.echo(f"  wrote {target}")
