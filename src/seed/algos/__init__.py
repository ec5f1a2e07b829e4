"""Algorithm core: advantages and losses as pure tensor functions. Imports only torch."""
from seed.algos.advantages import ADVANTAGES, discounted_returns, gigpo_advantages, grpo_advantages
from seed.algos.distill import OPD_KINDS, opd_loss, opid_shaping
from seed.algos.losses import entropy_from_logits, kl_k3, masked_mean, ppo_clip_loss

__all__ = [
    "ADVANTAGES", "discounted_returns", "gigpo_advantages", "grpo_advantages",
    "OPD_KINDS", "opd_loss", "opid_shaping",
    "entropy_from_logits", "kl_k3", "masked_mean", "ppo_clip_loss",
]
