"""BatchNorm recalibration shared by the training scripts."""

from __future__ import annotations

import torch


def recalibrate_bn(model: torch.nn.Module, batches) -> None:
    """Re-estimate every BatchNorm's running statistics as the plain average over ``batches``
    (callables running one forward pass each), in train mode without gradients. Short training
    runs otherwise export running stats that lag far behind the weights."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # cumulative moving average
    model.train()
    with torch.no_grad():
        for run in batches:
            run()
