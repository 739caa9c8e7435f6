"""``cuvil-perception quantize MODEL.onnx --calibrate DRIVE [--out MODEL.int8.onnx]``: static INT8.

Quantises the network the detector op runs in ONNX Runtime (YOLOv8 trunk, PointPillars BEV part)
with QDQ nodes, calibrated on frames of DRIVE through the op's own pre-processing, and writes a
model of the same layout: put it in a pipeline's ``model:`` param. Weights are 7-bit, so the
file computes the same on CPUs with and without VNNI (``quantize.int8``). Prints the CPU it ran
on; ``--evaluate DRIVE`` (a labelled drive) also measures the fp32 and int8 files side by side
on this machine: the AP change and the speed ratio (``quantize.evaluate``). ``eval
--compare-model`` measures the same inside a whole pipeline. Exit codes: 0 done, 2 usage error.
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
@click.option("--evaluate", "evaluate", metavar="DRIVE",
              help="A labelled drive: afterwards, run the fp32 and the int8 model over it side "
                   "by side and print the AP change and the speed ratio on this machine.")
def quantize_cmd(model: str, drive: str, out: str | None, frames: int, overwrite: bool,
                 evaluate: str | None) -> None:
    """Write an INT8 (QDQ) version of a detector model: a YOLOv8 detect export or a
    CUDA-PointPillars model, calibrated on DRIVE."""
    from ..machine_info import cpu
    from ..output_files import write_bytes_atomic
    from ..quantize import quantize_model
    from ..quantize.evaluate import labelled_drive
    from ..rt import Claim, check_outputs

    source = model_file(model, f"MODEL {model}")
    target = Path(out) if out else default_out(source)
    if not Path(drive).is_dir():
        raise UsageError(f"--calibrate {drive}: no such drive folder")
    inputs = [Claim("MODEL", source), Claim("--calibrate drive", Path(drive), folder=True)]
    if evaluate is not None:
        scored = labelled_drive(evaluate, "--evaluate")  # fails before the long part
        inputs.append(Claim("--evaluate drive", Path(evaluate), folder=True))
    check_outputs([Claim("--out", target)], inputs, overwrite=overwrite)

    with counter("calibrating: frame") as progress:
        data, summary = quantize_model(source, Path(drive), frames, progress)
    write_bytes_atomic(target, data)
    click.echo(f"{summary.kind}: {summary.quantized_nodes} DequantizeLinear nodes (QDQ), "
               f"{summary.float_nodes} nodes kept in float, calibrated on {summary.frames} "
               f"frame(s) of {drive}; {summary.bytes_in / 1e6:.2f} MB -> "
               f"{summary.bytes_out / 1e6:.2f} MB")
    click.echo(f"  wrote {target}")
    low, high = summary.weight_range
    exact = "7-bit: the same results with and without VNNI" if -64 <= low and high <= 63 \
        else "8-bit: CPUs without VNNI may saturate"
    click.echo(f"  int8 weights in [{low}, {high}] ({exact}); this machine: {cpu().describe()}, "
               f"{_dot_product(cpu())}")
    if evaluate is not None:
        _print_gap(summary.kind, source, target, scored, evaluate)


def _dot_product(host) -> str:
    """How this CPU adds ONNX Runtime's u8 x s8 products (``machine_info``)."""
    if host.int8_saturates:
        return "u8 x s8 pairs add in a saturating int16 (no VNNI): 8-bit weights would clip"
    return "int8 products add in int32"


def _print_gap(kind: str, fp32: Path, int8: Path, drive, name: str) -> None:
    """Score both files on ``drive`` side by side and print the AP change and speed ratio."""
    from ..machine_info import cpu
    from ..quantize.evaluate import compare_int8

    with counter("evaluating: frame") as progress:
        gap = compare_int8(kind, fp32, int8, drive, progress=progress)
    metric = "2D" if gap.metric == "2d" else "BEV"
    click.echo(f"evaluated on {name}: {gap.frames} frame(s), fp32 and int8 interleaved, one "
               f"ONNX Runtime thread, on {cpu().describe()}")
    for result, other in zip(gap.fp32.classes, gap.int8.classes):
        click.echo(f"  {metric} AP@0.5 {result.name:<11} fp32 {result.ap:.3f}  int8 "
                   f"{other.ap:.3f}  ({other.ap - result.ap:+.3f})")
    click.echo(f"  {metric} mAP@0.5 {'':<10} fp32 {gap.fp32.mean_ap:.3f}  int8 "
               f"{gap.int8.mean_ap:.3f}  ({gap.ap_change:+.3f})")
    ratio = gap.speedup
    verdict = f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
    click.echo(f"  speed: median CPU time per frame fp32 {gap.fp32.median_ms:.1f} ms, int8 "
               f"{gap.int8.median_ms:.1f} ms: int8 {verdict} on {cpu().isa}")
