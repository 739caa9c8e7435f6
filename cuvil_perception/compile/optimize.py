"""Optimisation options and the new-pass-manager pipeline (O3, loop + SLP vectorisation)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import llvmlite.binding as llvm


@dataclass(frozen=True)
class OptOptions:
    """What the optimiser is told; every field is part of the cache key."""

    speed_level: int = 3
    loop_vectorization: bool = True
    slp_vectorization: bool = True
    loop_unrolling: bool = True
    loop_interleaving: bool = True

    def key_material(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(asdict(self).items()))


DEFAULT_OPTIONS = OptOptions()
_NO_SLP = OptOptions(slp_vectorization=False)


def options_for(spec) -> OptOptions:
    """The options a `KernelSpec` is compiled with: the defaults, without SLP vectorisation for
    a spec that turns it off (``slp=False``)."""
    return DEFAULT_OPTIONS if spec.slp else _NO_SLP


def optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine, opts: OptOptions) -> None:
    """Run the module pipeline for ``opts.speed_level`` in place, tuned for ``tm``'s CPU
    (the vectoriser's cost model and register width come from the target machine)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=opts.speed_level)
    pto.loop_vectorization = opts.loop_vectorization
    pto.slp_vectorization = opts.slp_vectorization
    pto.loop_unrolling = opts.loop_unrolling
    pto.loop_interleaving = opts.loop_interleaving
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(module, pb)
