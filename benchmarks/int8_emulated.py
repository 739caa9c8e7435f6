"""INT8 accuracy on CPUs this machine is not: the detector's network run by ONNX Runtime under a
qemu-user emulator, everything else (letterbox / pillars, heads, decode, NMS, scoring) here.

Accuracy and bitwise agreement only, never speed (emulated). Per model (fp32 and int8 of one
detector) over the first FRAMES frames of a labelled drive: mAP here and on the emulated CPU,
and how many network output tensors are bitwise equal between the two.

CPUs (``--cpu``):

* ``avx2``: ``qemu-x86_64 -cpu EPYC-Milan`` (AMD Zen 3: AVX2 + FMA, no AVX-512, no VNNI; the
  u8 x s8 ``vpmaddubsw`` path that saturates 8-bit weights), this venv's Python;
* ``aarch64-dotprod`` / ``aarch64``: ``qemu-aarch64 -cpu neoverse-n1`` (ONNX Runtime's NEON
  ``udot``/``sdot`` kernels) / ``-cpu cortex-a72`` (no dot product: the widening NEON path), an
  aarch64 CPython 3.11 with numpy and onnxruntime of the same versions. Set it up once (Debian
  12, as root; nothing here is needed by the product or the tests)::

      dpkg --add-architecture arm64 && apt-get update
      apt-get download python3.11-minimal:arm64 libpython3.11-minimal:arm64 \\
          libpython3.11-stdlib:arm64 libc6:arm64 zlib1g:arm64 libexpat1:arm64 libffi8:arm64 \\
          libssl3:arm64 libbz2-1.0:arm64 liblzma5:arm64 libgcc-s1:arm64 libstdc++6:arm64
      for d in *.deb; do dpkg -x $d SYSROOT; done
      dpkg --remove-architecture arm64 && apt-get update
      pip install --target SITE --platform manylinux2014_aarch64 \\
          --platform manylinux_2_28_aarch64 --python-version 3.11 --only-binary=:all: \\
          numpy==$(python -c 'import numpy; print(numpy.__version__)') \\
          onnxruntime==$(python -c 'import onnxruntime; print(onnxruntime.__version__)')

  then ``--sysroot SYSROOT --site SITE``. ONNX Runtime's CPU detection (cpuinfo) crashes on
  this host's x86 ``/proc/cpuinfo`` under qemu-aarch64 (SIGSEGV at import), so the emulator
  runs in a private mount namespace (``unshare -m``, root) with an aarch64 ``/proc/cpuinfo``
  bound over it, naming the features of the emulated core.

Run: ``python benchmarks/int8_emulated.py --cpu avx2 --kind yolo --drive DRIVE --frames 100``
(a drive from ``cuvil-perception make-drive --seed 3000 --frames 100 DRIVE``, the model card's
held-out drive). The worker under emulation is ``tests/int8_cpu_support.py`` (numpy and
onnxruntime only).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _util import print_machine, print_table  # noqa: E402

from cuvil_perception.drives import Drive  # noqa: E402
from cuvil_perception.eval.ap import mean_ap  # noqa: E402
from cuvil_perception.graph import builtin_models_dir  # noqa: E402
from cuvil_perception.ops import onnx_runner  # noqa: E402
from cuvil_perception.quantize.evaluate import _load, _score  # noqa: E402

WORKER = HERE.parent / "tests" / "int8_cpu_support.py"
MODELS = {"yolo": ("yolov8_cuvil_demo.onnx", "yolov8_cuvil_demo.int8.onnx"),
          "pillars": ("pointpillars_cuvil_demo.onnx", "pointpillars_cuvil_demo.int8.onnx")}
#: the emulated aarch64 cores: qemu -cpu name, the /proc/cpuinfo Features line ONNX Runtime's
#: cpuinfo reads, the CPU part number
AARCH64 = {"aarch64-dotprod": ("neoverse-n1", "fp asimd evtstrm aes pmull sha1 sha2 crc32 "
                               "atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp", "0xd0c"),
           "aarch64": ("cortex-a72", "fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid", "0xd08")}


class Recording:
    """Wraps ``onnx_runner._ort_session`` so each session remembers its model bytes, and a
    runner's ``run`` either records (input, native outputs) or replays given outputs."""

    def __init__(self):
        self.model_of: dict[int, bytes] = {}
        original = onnx_runner._ort_session

        def session(data, *args, **kwargs):
            made = original(data, *args, **kwargs)
            self.model_of[id(made)] = data
            return made

        onnx_runner._ort_session = session

    def record(self, runner, calls: list) -> None:
        native = runner.run

        def run(blob):
            outputs = native(blob)
            calls.append((self.model_of[id(runner._session)], np.array(blob), runner.outputs,
                          [np.array(o) for o in outputs]))
            return outputs

        runner.run = run

    @staticmethod
    def replay(runner, outputs: list) -> None:
        queue = list(outputs)
        runner.run = lambda blob: queue.pop(0)


def runner_of(detect) -> object:
    """The OnnxRunner inside a ``quantize.evaluate._load`` detector closure."""
    runner = detect.__closure__[0].cell_contents.runner  # YoloV8's, or PointPillars' BevRunner
    return getattr(runner, "net", runner)


def emulator(args, tmp: Path) -> list[str]:
    """The command that runs the worker on the emulated CPU (its two file arguments follow)."""
    if args.cpu == "avx2":
        return [shutil.which("qemu-x86_64"), "-cpu", "EPYC-Milan", sys.executable, str(WORKER)]
    core, features, part = AARCH64[args.cpu]
    cpuinfo = tmp / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: {features}\n"
                       f"CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n"
                       f"CPU part\t: {part}\nCPU revision\t: 1\n\n")
    python = Path(args.sysroot) / "usr" / "bin" / "python3.11"
    inner = (f"mount --bind {cpuinfo} /proc/cpuinfo && PYTHONPATH={args.site} exec "
             f"{shutil.which('qemu-aarch64')} -cpu {core} -L {args.sysroot} {python} {WORKER}"
             ' "$0" "$1"')
    return ["unshare", "-m", "sh", "-c", inner]


def run_emulated(args, calls: list, tmp: Path) -> list:
    source, result = tmp / "in.npz", tmp / "out.npz"
    arrays = {}
    for k, (model, blob, names, _) in enumerate(calls):
        arrays.update({f"model{k}": np.frombuffer(model, np.uint8), f"feed{k}": blob,
                       f"outputs{k}": np.array(names)})
    np.savez(source, **arrays)
    done = subprocess.run(emulator(args, tmp) + [str(source), str(result)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the emulated run failed:\n{done.stderr[-3000:]}")
    with np.load(result) as out:
        return [[out[f"job{k}_{i}"] for i in range(len(names))]
                for k, (_, _, names, _) in enumerate(calls)]


def measure(args, path: Path, drive: Drive, recording: Recording) -> list:
    """[model, mAP here, mAP emulated, (car/ped/cyc emulated), tensors equal]."""
    detect, xy_range = _load(args.kind, path)
    runner = runner_of(detect)
    calls: list = []
    recording.record(runner, calls)
    frames = [drive.read(i) for i in range(min(args.frames, len(drive)))]
    here = [detect(frame) + (frame.labels,) for frame in frames]
    with tempfile.TemporaryDirectory() as tmp:
        emulated = run_emulated(args, calls, Path(tmp))
    equal = sum(np.array_equal(a, b) for (_, _, _, ours), theirs in zip(calls, emulated)
                for a, b in zip(ours, theirs))
    total = sum(len(ours) for *_, ours in calls)
    recording.replay(runner, emulated)
    there = [detect(frame) + (frame.labels,) for frame in frames]
    classes = _score(args.kind, there, xy_range)
    per_class = " / ".join(f"{c.ap:.3f}" for c in classes)
    return [path.name, f"{mean_ap(_score(args.kind, here, xy_range)):.3f}",
            f"{mean_ap(classes):.3f}", per_class, f"{equal} of {total}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", choices=["avx2", *AARCH64], default="avx2")
    parser.add_argument("--kind", choices=sorted(MODELS), default="yolo")
    parser.add_argument("--drive", required=True, help="a labelled drive folder")
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--sysroot", help="aarch64: the extracted Debian arm64 Python")
    parser.add_argument("--site", help="aarch64: numpy + onnxruntime for aarch64 (--target)")
    args = parser.parse_args()
    if args.cpu != "avx2" and not (args.sysroot and args.site):
        parser.error(f"--cpu {args.cpu} needs --sysroot and --site (see the docstring)")
    print_machine()
    print(f"emulated CPU: {args.cpu} ({' '.join(emulator(args, Path('/tmp'))[:5])} ...)")
    drive, recording = Drive(Path(args.drive)), Recording()
    rows = [measure(args, builtin_models_dir() / name, drive, recording)
            for name in MODELS[args.kind]]
    print_table(f"{args.kind}: fp32 and int8 here and on the emulated {args.cpu} CPU",
                ["model", "mAP here", f"mAP {args.cpu}", "per class (emulated)",
                 "outputs bitwise equal"], rows)


if __name__ == "__main__":
    main()
