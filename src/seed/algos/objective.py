"""The RL objective of one micro-batch, as the paper writes it:

    L = L_PPO + kl_coef * KL(pi || pi_ref) - entropy_coef * H + distill_coef * L_OPD

Every term is a token-sum over this micro-batch divided by a token count of the whole mini-batch (all response
tokens for the policy terms, the OPD-active ones for L_OPD), so the micro-batches of a mini-batch add up to its
token-means however the mini-batch was split. The stats are additive the same way.

The paper writes beta for the KL coefficient too; here beta is only the SEED gate's sharpness (`DistillParams`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from seed.algos.distill import DISTILL_LOSSES, DistillParams, DistillTokens, delta_of
from seed.algos.losses import POLICY_LOSSES, PolicyLossParams, kl_k3, masked_sum


@dataclass(frozen=True)
class TokenTensors:
    """Per-token tensors [batch, tokens] of one micro-batch (advantage may be [batch])."""

    logp: torch.Tensor  # student, with grad
    old_logp: torch.Tensor  # rollout weights
    advantage: torch.Tensor
    mask: torch.Tensor  # response tokens
    ref_logp: torch.Tensor | None = None  # KL reference
    entropy: torch.Tensor | None = None
    teacher_logp: torch.Tensor | None = None  # the sampled tokens under the skill prompt
    skill_mask: torch.Tensor | None = None  # response tokens of steps whose episode has a skill


@dataclass(frozen=True)
class ObjectiveParams:
    policy_loss: str = "ppo_clip"
    policy: PolicyLossParams = PolicyLossParams()
    kl_coef: float = 0.01
    entropy_coef: float = 0.001
    distill: str = "none"  # a DISTILL_LOSSES key, or none
    distill_coef: float = 0.01
    distill_params: DistillParams = DistillParams()


@dataclass
class LossStats:
    """Additive over the micro-batches of a mini-batch (each value is already divided by the mini-batch's tokens)."""

    loss: float = 0.0
    pg_loss: float = 0.0
    kl: float = 0.0
    entropy: float = 0.0
    clip_frac: float = 0.0
    dual_clip_frac: float = 0.0
    approx_kl: float = 0.0
    opd_loss: float = 0.0
    delta_sum: float = 0.0  # over OPD-active tokens (means: divide by active_tokens)
    gate_sum: float = 0.0
    active_tokens: float = 0.0

    def __add__(self, other: LossStats) -> LossStats:
        return LossStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


def rl_objective(
    t: TokenTensors, p: ObjectiveParams, tokens: float, active_tokens: float
) -> tuple[torch.Tensor, LossStats]:
    """L for one micro-batch; `tokens` / `active_tokens`: the mini-batch's response / OPD-active token counts."""
    n, n_active = max(1.0, float(tokens)), max(1.0, float(active_tokens))
    adv, opd, distill_tokens = t.advantage, None, None
    if adv.dim() == 1:
        adv = adv[:, None].expand_as(t.logp)
    if p.distill != "none" and t.teacher_logp is not None and t.skill_mask is not None:
        distill_tokens = DistillTokens(t.logp, t.teacher_logp, t.old_logp, t.skill_mask)
        opd = DISTILL_LOSSES[p.distill](distill_tokens, p.distill_params)
        if opd.advantage_shift is not None:
            adv = adv + opd.advantage_shift
    pg_per_token, indicators = POLICY_LOSSES[p.policy_loss](t.logp, t.old_logp, adv, p.policy)
    pg = masked_sum(pg_per_token, t.mask) / n
    kl = masked_sum(kl_k3(t.logp, t.ref_logp), t.mask) / n if t.ref_logp is not None else torch.zeros(())
    entropy = masked_sum(t.entropy, t.mask) / n if t.entropy is not None else torch.zeros(())
    opd_loss = masked_sum(opd.loss, opd.active) / n_active if opd is not None else torch.zeros(())
    loss = pg + p.kl_coef * kl - p.entropy_coef * entropy + p.distill_coef * opd_loss
    stats = LossStats(
        loss=loss.item(),
        pg_loss=pg.item(),
        kl=kl.item(),
        entropy=entropy.item(),
        **{k: masked_sum(v, t.mask).item() / n for k, v in indicators.items()},
        opd_loss=opd_loss.item(),
    )
    if opd is not None and opd.active.sum() > 0:
        delta = delta_of(distill_tokens)
        gate = torch.sigmoid(p.distill_params.beta * delta)
        stats.delta_sum = float(masked_sum(delta, opd.active))
        stats.gate_sum = float(masked_sum(gate, opd.active))
        stats.active_tokens = float(opd.active.sum())
    return loss, stats
