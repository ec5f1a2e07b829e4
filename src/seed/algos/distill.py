"""On-policy distillation losses over the *sampled* response tokens (SEED and its peers).

All take per-token log-probs of the sampled tokens under the student (`logp`, with grad) and under the teacher
context (`teacher_logp`, the same tokens re-scored with the skill in the prompt, no grad) and a `mask` of the
OPD-active tokens. Every loss is a token-mean over the active tokens, and exactly 0 when none is active.
"""
from __future__ import annotations

import torch

from seed.algos.losses import masked_mean

OPD_KINDS = ("seed", "opsd", "positive", "skill_sd")


def opd_loss(
    logp: torch.Tensor,
    teacher_logp: torch.Tensor,
    mask: torch.Tensor,
    kind: str = "seed",
    beta: float = 5.0,
    old_logp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Distillation loss and its stats (delta mean, gate mean, active tokens).

    seed:      g = sigmoid(beta * delta) (detached), loss = g * (sg(l_skill) - l_theta); grad = -g * grad l_theta.
    positive:  as seed, but only tokens with delta > 0 are active.
    opsd:      ungated on-policy distillation: per-token reward delta, loss = -sg(delta) * l_theta.
    skill_sd:  importance-weighted reverse KL: rho = exp(l_theta - l_old), loss = rho * sg(l_old - l_skill).
    with delta = sg(l_skill - l_theta).
    """
    if kind not in OPD_KINDS:
        raise ValueError(f"unknown opd kind {kind!r}; allowed: {', '.join(OPD_KINDS)}")
    mask = mask.to(logp.dtype)
    teacher_logp = teacher_logp.detach()
    delta = (teacher_logp - logp).detach()
    gate = torch.sigmoid(beta * delta)
    if kind == "positive":
        mask = mask * (delta > 0).to(mask.dtype)
    if kind in ("seed", "positive"):
        per_token = gate * (teacher_logp - logp)
    elif kind == "opsd":
        per_token = -delta * logp
    else:
        old = (old_logp if old_logp is not None else logp).detach()
        per_token = torch.exp(logp - old) * (old - teacher_logp)
    loss = masked_mean(per_token, mask)
    stats = {
        "delta_mean": float(masked_mean(delta, mask)),
        "gate_mean": float(masked_mean(gate, mask)),
        "active_tokens": float(mask.sum()),
    }
    return loss, stats


def opid_shaping(adv: torch.Tensor, delta: torch.Tensor, w: float = 0.001) -> torch.Tensor:
    """OPID-style advantage shaping: A <- A + w * delta per token (delta detached)."""
    if adv.dim() == 1 and delta.dim() == 2:
        adv = adv[:, None].expand_as(delta)
    return adv + w * delta.detach()
