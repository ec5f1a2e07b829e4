"""The guarded optimizer step of the start stages (format warm-up, analyzer SFT): a step whose loss or gradient
norm is NaN/inf is not taken, so a bad batch can never write non-finite weights (the RL update has the same
guard, shared across data-parallel ranks, in seed.train.rl.policy_update)."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import torch

from seed.models.load import trainable_parameters
from seed.train.metrics import trim_heap

if TYPE_CHECKING:  # annotations only
    from seed.config import Config

log = logging.getLogger(__name__)


def adamw(
    model: torch.nn.Module, lr: float, weight_decay: float, betas: tuple[float, float] = (0.9, 0.999)
) -> torch.optim.AdamW:
    """AdamW over the model's trainable parameters, fused where the parameters are plain tensors: one kernel per
    parameter updates the moments and the weight in place, where the multi-tensor path allocates temporaries the
    size of all parameters for each of its steps (a transient peak the size of the fp32 model on CPU). Sharded
    (DTensor) parameters keep the multi-tensor path."""
    params = list(trainable_parameters(model).values())
    fused = all(type(p.data) is torch.Tensor for p in params)
    return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay, fused=fused or None)


def make_optimizer(model: torch.nn.Module, cfg: Config) -> torch.optim.AdamW:
    """The RL update's optimizer (`algo.lr`, `algo.weight_decay`)."""
    return adamw(model, lr=cfg.algo.lr, weight_decay=cfg.algo.weight_decay)


def guarded_step(
    optimizer: torch.optim.Optimizer, params: list[torch.Tensor], max_norm: float, loss_value: float
) -> bool:
    """Clip, step and drop the spent gradients; False (gradients dropped, nothing changed) when the loss or the
    gradient norm is not finite."""
    norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm)) if math.isfinite(loss_value) else math.nan
    if not math.isfinite(norm):
        optimizer.zero_grad(set_to_none=True)
        log.warning("optimizer step skipped: non-finite %s", "loss" if not math.isfinite(loss_value) else "gradient")
        return False
    trim_heap()  # the backward's freed blocks go back to the OS before the step allocates (AdamW's state, once)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)  # spent: no gradient outlives its step
    return True


def warmup_cosine(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over the first `warmup_ratio` of the steps, then cosine decay to 0 (verl's SFT schedule)."""
    warm = max(1, math.ceil(warmup_ratio * total_steps)) if warmup_ratio > 0 else 0

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        progress = (step - warm) / max(1, total_steps - warm)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
