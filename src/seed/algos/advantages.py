"""Advantage estimators: small pure functions over tensors (verl-style registry).

GRPO gives one scalar per episode, normalised inside its group of G episodes that share an initial state.
GiGPO adds a step-level term computed over *anchor-state groups*: steps of the same group whose observation is
identical, compared through their discounted returns.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable, Sequence

import torch

__all__ = ["grpo_advantages", "gigpo_advantages", "discounted_returns", "ADVANTAGES"]


def grpo_advantages(
    rewards: torch.Tensor, group_ids: Sequence[int] | torch.Tensor, norm: str = "mean_std", eps: float = 1e-6
) -> torch.Tensor:
    """Per-episode GRPO advantages.

    mean_std: (r - mean_g) / (std_g + eps) with the unbiased std; mean: r - mean_g. A group of one gets 0.
    """
    if norm not in ("mean_std", "mean"):
        raise ValueError(f"norm must be one of 'mean_std', 'mean'; got {norm!r}")
    rewards = rewards.to(torch.float64)
    gids = torch.as_tensor(list(group_ids) if not torch.is_tensor(group_ids) else group_ids)
    if gids.shape[0] != rewards.shape[0]:
        raise ValueError("rewards and group_ids must have the same length")
    adv = torch.zeros_like(rewards)
    for g in torch.unique(gids):
        idx = (gids == g).nonzero(as_tuple=True)[0]
        if idx.numel() < 2:
            continue
        r = rewards[idx]
        centred = r - r.mean()
        adv[idx] = centred / (r.std(unbiased=True) + eps) if norm == "mean_std" else centred
    return adv.to(torch.float32)


def discounted_returns(step_rewards: Sequence[float], gamma: float) -> list[float]:
    """G_t = r_t + gamma * G_{t+1}, computed backwards over one episode."""
    out, running = [0.0] * len(step_rewards), 0.0
    for t in range(len(step_rewards) - 1, -1, -1):
        running = step_rewards[t] + gamma * running
        out[t] = running
    return out


def gigpo_advantages(
    episode_rewards: torch.Tensor,
    episode_group_ids: Sequence[int],
    step_episode_index: Sequence[int],
    step_anchor_keys: Sequence[str],
    step_rewards: Sequence[float],
    step_weight: float = 1.0,
    gamma: float = 0.95,
    norm: str = "mean_std",
    eps: float = 1e-6,
) -> torch.Tensor:
    """Per-step GiGPO advantages: episode term (GRPO) + step_weight x step term.

    Steps are grouped by (episode group, anchor key = the observation text). Inside each anchor group the
    discounted return of every step is normalised like GRPO; anchor groups of one step get a step term of 0.
    `step_episode_index[i]` says which episode (row of `episode_rewards`) step i belongs to; steps of one
    episode must be listed in order.
    """
    n_steps = len(step_episode_index)
    if not (len(step_anchor_keys) == len(step_rewards) == n_steps):
        raise ValueError("step_episode_index, step_anchor_keys and step_rewards must have the same length")
    episode_adv = grpo_advantages(episode_rewards, episode_group_ids, norm=norm, eps=eps)

    per_episode: dict[int, list[int]] = defaultdict(list)
    for i, e in enumerate(step_episode_index):
        per_episode[e].append(i)
    returns = [0.0] * n_steps
    for e, idx in per_episode.items():
        for i, g in zip(idx, discounted_returns([step_rewards[i] for i in idx], gamma)):
            returns[i] = g

    anchors: dict[tuple, list[int]] = defaultdict(list)
    for i in range(n_steps):
        anchors[(int(episode_group_ids[step_episode_index[i]]), step_anchor_keys[i])].append(i)
    step_term = torch.zeros(n_steps, dtype=torch.float32)
    for idx in anchors.values():
        if len(idx) < 2:
            continue
        r = torch.tensor([returns[i] for i in idx], dtype=torch.float64)
        centred = r - r.mean()
        vals = centred / (r.std(unbiased=True) + eps) if norm == "mean_std" else centred
        step_term[idx] = vals.to(torch.float32)
    ep_index = torch.as_tensor(list(step_episode_index), dtype=torch.long)
    return episode_adv[ep_index] + step_weight * step_term


ADVANTAGES: dict[str, Callable] = {"grpo": grpo_advantages, "gigpo": gigpo_advantages}
