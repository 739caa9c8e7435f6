"""``pillars.detect`` as one C call per frame: the `LibraryPart` of a whole-pipeline library.

`detect_part(pp, symbols, prefix, backbone)` renders `c_detect_source` for a loaded
`PointPillars` (the sparse path: a fused first Conv+BN+ReLU and 1x1 heads at candidate cells)
with every weight the native stages read in one blob, ``<prefix>_weights``: float32 tensors,
each starting on a 64-byte boundary, in this order (offsets in floats are ``#define``d in
``<prefix>_api.c``):

    pfn_weights  [14, C]              kernel_pfn.fold_weights (layout in the header's PFN block)
    pfn_bias     [C]
    conv_weights [kh * kw, C_in, C_out]  [ky * kw + kx, ci, co] = W[co, ci, ky, kx], BN folded
    conv_bias    [C_out]
    head_weights [C_f, J]             box rows then direction rows, transposed, zero-padded to J
    head_bias    [J]
    anchors      [A, 7]               x y z dx dy dz heading (reference.anchors)

The network between the first layer and the heads is ``<prefix>_backbone`` (declared in
`c_detect_source`): the native backbone's `LibraryPart` (`c_backbone`, from the lowered
network: `c_net`) defines it, with its own weights. Without one (``backbone`` None) a library
of the whole pipeline is refused (a `UsageError`: one line); ``compile --library
--kernels-only`` builds the kernels alone.
"""

from __future__ import annotations

import numpy as np

from ...compile.cabi import LibraryPart, internal_symbol
from ...compile.cheader import macro_name
from ...drives.labels import CLASSES
from ...errors import UsageError
from ...geometry.bev_iou import TABLE_WIDTH
from .c_detect_source import HEADER, SOURCE
from .kernel_pillarize import grid_type
from .model import PointPillars
from .native_sparse import ConvScatterKernel, HeadCellsKernel

ALIGN_FLOATS = 16  # 64 bytes


def weights_blob(pp: PointPillars) -> tuple[bytes, dict[str, int]]:
    """(the blob's bytes, tensor name -> offset in floats): see the module docstring."""
    conv, heads = pp.scatter, pp.heads
    tensors = (("pfn_weights", pp.pfn.weights), ("pfn_bias", pp.pfn.bias),
               ("conv_weights", conv.weights), ("conv_bias", conv.bias),
               ("head_weights", heads.weights), ("head_bias", heads.bias),
               ("anchors", pp.decode.anchor_table))
    chunks, offsets, at = [], {}, 0
    for name, array in tensors:
        flat = np.ascontiguousarray(array, "<f4").ravel()
        pad = -len(flat) % ALIGN_FLOATS
        offsets[name] = at
        chunks += [flat, np.zeros(pad, "<f4")]
        at += len(flat) + pad
    return np.concatenate(chunks).tobytes(), offsets


def check_sparse(pp: PointPillars, where: str) -> None:
    """The C pipeline follows the sparse path; a model that keeps the dense one is refused."""
    if not isinstance(pp.scatter, ConvScatterKernel) or not isinstance(pp.heads,
                                                                       HeadCellsKernel):
        raise UsageError(f"{where}: the C pipeline needs the sparse path (a first Conv+BN+ReLU "
                         "and 1x1 box / direction heads; `inspect` says which path this model "
                         "takes); use --kernels-only")


def detect_part(pp: PointPillars, symbols: dict, prefix: str, backbone: LibraryPart | None,
                where: str = "pillars.detect", model: str = "the model",
                workspace: int = 0) -> LibraryPart:
    """The whole-pipeline API for ``pp`` (module docstring). ``symbols``: KernelSpec ->
    exported symbol; ``backbone``: the native backbone's part, which defines
    ``<prefix>_backbone`` (None: refused with one line naming ``where`` and ``model``);
    ``workspace``: its workspace's bytes (counted in ``<PREFIX>_HANDLE_BYTES``)."""
    check_sparse(pp, where)
    if backbone is None:
        raise UsageError(f"{where}: the backbone of {model} cannot be compiled "
                              "natively yet (it runs in ONNX Runtime), so there is no "
                              "one-call C pipeline; use --kernels-only for the pre/post kernels")
    part = render(pp, symbols, prefix, workspace)
    return LibraryPart(part.header, part.source + "\n\n" + backbone.source,
                       {**part.blobs, **backbone.blobs})


def render(pp: PointPillars, symbols: dict, prefix: str, workspace: int = 0) -> LibraryPart:
    """The part without a backbone: ``<prefix>_backbone`` stays an undefined symbol (what the
    native backbone plugs into: `c_backbone`); ``workspace`` as in `detect_part`."""
    blob, offsets = weights_blob(pp)
    fill = _sizes(pp, workspace) | {f"W_{name.upper()}": str(at) for name, at in offsets.items()}
    for step, kernel in (("PILLARIZE", pp.pillarize), ("PFN", pp.pfn), ("CONV", pp.scatter),
                         ("HEADS", pp.heads), ("DECODE", pp.decode), ("NMS", pp.nms)):
        fill[f"K_{step}"] = internal_symbol(prefix, symbols[kernel.spec.release()])
    fill |= {"P": prefix, "M": macro_name(prefix)}
    header, source = HEADER, SOURCE
    for key, value in fill.items():
        header, source = header.replace(f"@{key}@", value), source.replace(f"@{key}@", value)
    return LibraryPart(header, source, {f"{prefix}_weights": blob})


def _sizes(pp: PointPillars, workspace: int) -> dict[str, str]:
    """The static sizes the C text is written over."""
    config, head = pp.config, pp.head
    conv, heads = pp.scatter.spec.static, pp.heads.spec.static
    fill = {"MAX_PILLARS": config.max_pillars, "MAX_POINTS": config.max_points_per_pillar,
            "NUM_CELLS": config.num_cells, "CHANNELS": config.num_features,
            "HO": conv["ho"], "WO": conv["wo"], "COUT": conv["cout"],
            "CELLS": heads["cells"], "GROUPS": heads["groups"], "JB": heads["jb"],
            "JD": heads["jd"], "NPARTS": len(heads["parts"]),
            "CAP": head.candidate_capacity(config), "PRE": head.nms_pre,
            "POST": head.nms_post, "TABLE_WIDTH": TABLE_WIDTH,
            "CLASSES": head.num_classes}
    text = {k: str(v) for k, v in fill.items()}
    text["PARTS"] = ", ".join(str(p) for p in heads["parts"])
    text["FEAT_LAYOUT"] = (f"f32 [{heads['cells']}, parts[k]] (NHWC)" if heads.get("nhwc")
                           else f"f32 [parts[k], {heads['cells']}] (NCHW)")
    text["GRID_T"] = "int16_t" if grid_type(config.max_pillars).dtype == np.int16 else "int32_t"
    text["CLASS_NAMES"] = ", ".join(f"{i} {name}" for i, name in
                                    enumerate(CLASSES[:head.num_classes]))
    handle = _handle_bytes(fill, config, sum(heads["parts"])) + workspace
    text["HANDLE_BYTES"], text["HANDLE_MB"] = str(handle), f"{handle / 1e6:.0f}"
    return text


def _handle_bytes(f: dict, config, feat_channels: int) -> int:
    """What open allocates but the backbone's workspace, in bytes."""
    m, cells, out = f["MAX_PILLARS"], f["NUM_CELLS"], f["HO"] * f["WO"]
    grid = 2 if grid_type(config.max_pillars).dtype == np.int16 else 4
    floats = ((m * f["MAX_POINTS"] + 4) * 4 + m * f["CHANNELS"] + out * f["COUT"] +
              f["CELLS"] * (f["GROUPS"] + f["JB"] + f["JD"] + feat_channels) +
              f["CAP"] * 9 + f["PRE"] * 7)
    ints = m * 5 + cells + out * 2 + f["CELLS"] + f["CAP"] * 2 + f["POST"]
    doubles = f["PRE"] * (2 + f["TABLE_WIDTH"] + 4)
    return floats * 4 + ints * 4 + doubles * 8 + cells * grid + out + f["PRE"] * 2
