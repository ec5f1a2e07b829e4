"""Policy losses: pure functions over per-token tensors of shape [batch, tokens], in a registry.

Every policy loss takes (logp, old_logp, advantage, params) and returns the per-token loss and per-token
indicators for its stats; the objective (`seed.algos.objective`) aggregates them over the response mask.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = [
    "masked_mean",
    "masked_sum",
    "PolicyLossParams",
    "ppo_clip",
    "ppo_clip_loss",
    "kl_k3",
    "entropy_from_logits",
    "POLICY_LOSSES",
]


def masked_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask.to(x.dtype)).sum()


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x over mask; 0 (not NaN) when the mask is empty."""
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


@dataclass(frozen=True)
class PolicyLossParams:
    clip: float = 0.2  # the ratio is clipped to [1 - clip, 1 + clip]
    clip_ratio_c: float = 3.0  # dual clip: for A < 0 the loss is at most -c * A (0 = off)


def ppo_clip(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, p: PolicyLossParams
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token clipped surrogate -min(r A, clip(r) A), r = exp(logp - old_logp); with dual clip, tokens with
    A < 0 are bounded by -c A (a huge ratio on a bad token cannot blow the step up)."""
    if adv.dim() == 1:
        adv = adv[:, None].expand_as(logp)
    ratio = torch.exp(logp - old_logp)
    clipped_ratio = torch.clamp(ratio, 1.0 - p.clip, 1.0 + p.clip)
    loss = torch.maximum(-ratio * adv, -clipped_ratio * adv)
    if p.clip_ratio_c > 0:
        loss = torch.where(adv < 0, torch.minimum(loss, -p.clip_ratio_c * adv), loss)
    with torch.no_grad():
        indicators = {
            "clip_frac": ((ratio - 1.0).abs() > p.clip).float(),
            "dual_clip_frac": ((adv < 0) & (ratio > p.clip_ratio_c)).float()
            if p.clip_ratio_c > 0
            else torch.zeros_like(ratio),
            "approx_kl": old_logp - logp,
        }
    return loss, indicators


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    clip: float = 0.2,
    clip_ratio_c: float = 3.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """`ppo_clip` as a token-mean over `mask`, with its stats as floats."""
    loss, ind = ppo_clip(logp, old_logp, adv, PolicyLossParams(clip, clip_ratio_c))
    return masked_mean(loss, mask), {k: float(masked_mean(v, mask)) for k, v in ind.items()}


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 ("low-variance") KL estimate: x = ref - logp, exp(x) - x - 1, clamped to [-10, 10]."""
    x = ref_logp - logp
    return torch.clamp(torch.exp(x) - x - 1.0, min=-10.0, max=10.0)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Per-token entropy of the categorical distribution given by logits [..., vocab]."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


POLICY_LOSSES: dict[str, Callable] = {"ppo_clip": ppo_clip}
