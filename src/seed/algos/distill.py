"""On-policy distillation over the *sampled* response tokens (SEED and its peers), in a registry.

Every entry takes `DistillTokens` (per-token log-probs of the sampled tokens under the student with grad, under the
teacher context, i.e. the same tokens re-scored with the skill in the prompt, and under the rollout weights) and
`DistillParams`, and returns a `DistillTerm`: the per-token loss, the tokens where it is active, and a per-token
advantage shift (OPID shapes the advantage instead of adding a loss). With delta = sg(l_skill - l_theta):

seed:      g = sigmoid(beta * delta) (detached), loss = g * (sg(l_skill) - l_theta); grad = -g * grad l_theta
positive:  as seed, but only tokens the skill raised under the rollout weights (sg(l_skill - l_old) > 0) are active,
           so the active set, and the token count L_OPD is averaged over, is fixed before the update starts
opsd:      ungated on-policy distillation: per-token reward delta, loss = -delta * l_theta
skill_sd:  importance-weighted reverse KL: rho = exp(l_theta - l_old), loss = rho * sg(l_old - l_skill)
opid:      no loss; A <- A + w * delta on the skill's tokens
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from seed.algos.losses import masked_mean


@dataclass(frozen=True)
class DistillTokens:
    logp: torch.Tensor  # student, with grad
    teacher_logp: torch.Tensor  # the same tokens under the skill prompt
    old_logp: torch.Tensor  # the rollout weights' log-probs (skill_sd's importance ratio)
    mask: torch.Tensor  # 1 on response tokens of steps whose episode has a skill


@dataclass(frozen=True)
class DistillParams:
    beta: float = 5.0  # gate sharpness
    opid_weight: float = 0.001


@dataclass
class DistillTerm:
    loss: torch.Tensor  # per token
    active: torch.Tensor  # per token, 1 where the loss counts
    advantage_shift: torch.Tensor | None = None  # per token, added to the advantage


def delta_of(t: DistillTokens) -> torch.Tensor:
    """The skill-induced shift of each sampled token: teacher minus student log-prob, detached."""
    return (t.teacher_logp - t.logp).detach()


def seed_loss(t: DistillTokens, p: DistillParams) -> DistillTerm:
    gate = torch.sigmoid(p.beta * delta_of(t))
    return DistillTerm(gate * (t.teacher_logp.detach() - t.logp), t.mask)


def positive_loss(t: DistillTokens, p: DistillParams) -> DistillTerm:
    term = seed_loss(t, p)
    term.active = t.mask * raised_by_skill(t.teacher_logp, t.old_logp).to(t.mask.dtype)
    return term


def raised_by_skill(teacher_logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    """positive's active tokens: those the skill made more likely than the rollout weights did."""
    return (teacher_logp - old_logp).detach() > 0


def opsd_loss(t: DistillTokens, p: DistillParams) -> DistillTerm:
    return DistillTerm(-delta_of(t) * t.logp, t.mask)


def skill_sd_loss(t: DistillTokens, p: DistillParams) -> DistillTerm:
    old = t.old_logp.detach()
    return DistillTerm(torch.exp(t.logp - old) * (old - t.teacher_logp.detach()), t.mask)


def opid_shift(t: DistillTokens, p: DistillParams) -> DistillTerm:
    return DistillTerm(torch.zeros_like(t.logp), torch.zeros_like(t.mask), p.opid_weight * delta_of(t) * t.mask)


DISTILL_LOSSES: dict[str, Callable[[DistillTokens, DistillParams], DistillTerm]] = {
    "seed": seed_loss,
    "opsd": opsd_loss,
    "positive": positive_loss,
    "skill_sd": skill_sd_loss,
    "opid": opid_shift,
}
OPD_KINDS = tuple(k for k in DISTILL_LOSSES if k != "opid")  # the kinds that add a loss


def opd_loss(
    logp: torch.Tensor,
    teacher_logp: torch.Tensor,
    mask: torch.Tensor,
    kind: str = "seed",
    beta: float = 5.0,
    old_logp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """One distillation loss as a token-mean over its active tokens (0 when none is active), with its stats."""
    if kind not in OPD_KINDS:
        raise ValueError(f"unknown opd kind {kind!r}; allowed: {', '.join(OPD_KINDS)}")
    mask = mask.to(logp.dtype)
    tokens = DistillTokens(logp, teacher_logp, old_logp if old_logp is not None else logp, mask)
    term = DISTILL_LOSSES[kind](tokens, DistillParams(beta=beta))
    delta = delta_of(tokens)
    return masked_mean(term.loss, term.active), {
        "delta_mean": float(masked_mean(delta, term.active)),
        "gate_mean": float(masked_mean(torch.sigmoid(beta * delta), term.active)),
        "active_tokens": float(term.active.sum()),
    }


def opid_shaping(adv: torch.Tensor, delta: torch.Tensor, w: float = 0.001) -> torch.Tensor:
    """OPID-style advantage shaping: A <- A + w * delta per token (delta detached)."""
    if adv.dim() == 1 and delta.dim() == 2:
        adv = adv[:, None].expand_as(delta)
    return adv + w * delta.detach()
