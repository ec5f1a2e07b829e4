"""Algorithm core: advantage estimators, policy losses and distillation losses as pure tensor functions in
registries, and the objective that combines them. Imports only torch."""

from seed.algos.advantages import (
    ADVANTAGES,
    GROUPINGS,
    INVALID_ADVANTAGES,
    NORMS,
    AdvantageParams,
    StepScores,
    cap_invalid,
    discounted_returns,
    gigpo_advantages,
    group_normalise,
    grpo_advantages,
)
from seed.algos.distill import (
    DISTILL_LOSSES,
    OPD_KINDS,
    DistillParams,
    DistillTerm,
    DistillTokens,
    opd_loss,
    opid_shaping,
)
from seed.algos.losses import (
    POLICY_LOSSES,
    PolicyLossParams,
    entropy_from_logits,
    kl_k3,
    masked_mean,
    masked_sum,
    ppo_clip,
    ppo_clip_loss,
)
from seed.algos.objective import LossStats, ObjectiveParams, TokenTensors, rl_objective

__all__ = [
    "ADVANTAGES",
    "GROUPINGS",
    "INVALID_ADVANTAGES",
    "NORMS",
    "AdvantageParams",
    "StepScores",
    "cap_invalid",
    "discounted_returns",
    "gigpo_advantages",
    "group_normalise",
    "grpo_advantages",
    "DISTILL_LOSSES",
    "OPD_KINDS",
    "DistillParams",
    "DistillTerm",
    "DistillTokens",
    "opd_loss",
    "opid_shaping",
    "POLICY_LOSSES",
    "PolicyLossParams",
    "entropy_from_logits",
    "kl_k3",
    "masked_mean",
    "masked_sum",
    "ppo_clip",
    "ppo_clip_loss",
    "LossStats",
    "ObjectiveParams",
    "TokenTensors",
    "rl_objective",
]
