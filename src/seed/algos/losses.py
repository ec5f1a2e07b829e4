"""Policy losses: pure functions over per-token tensors of shape [batch, tokens].

Every loss is a token-mean over `mask` (1 on response tokens that count), as in the paper's recipe.
"""
from __future__ import annotations

import torch

__all__ = ["masked_mean", "ppo_clip_loss", "kl_k3", "entropy_from_logits"]


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x over mask; 0 (not NaN) when the mask is empty."""
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


def ppo_clip_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, clip: float = 0.2
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate: -min(r A, clip(r, 1-c, 1+c) A), r = exp(logp - old_logp).

    `adv` is broadcast per token (shape [batch, tokens] or [batch]).
    """
    if adv.dim() == 1:
        adv = adv[:, None].expand_as(logp)
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv
    loss = masked_mean(-torch.minimum(unclipped, clipped), mask)
    with torch.no_grad():
        clip_frac = masked_mean(((ratio - 1.0).abs() > clip).float(), mask)
        approx_kl = masked_mean(old_logp - logp, mask)
    return loss, {"clip_frac": float(clip_frac), "approx_kl": float(approx_kl)}


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 ("low-variance") KL estimate: x = ref - logp, exp(x) - x - 1, clamped to [-10, 10]."""
    x = ref_logp - logp
    return torch.clamp(torch.exp(x) - x - 1.0, min=-10.0, max=10.0)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Per-token entropy of the categorical distribution given by logits [..., vocab]."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)
