"""Advantage estimators: pure functions with one signature, in a registry (verl style).

Every estimator takes the step samples of one update (`StepScores`) and `AdvantageParams` and returns one advantage
per step sample. Adding an estimator is one function here, one entry in `ADVANTAGES`, and its test.

GRPO normalises scores inside a group (the G episodes that share an initial state). Over `steps` (the official
code) every step sample has its own score (the episode's outcome minus that step's invalid-action penalty) and the
group statistics run over all step samples, so longer episodes weigh more; over `episodes` each episode has one
score (outcome minus the penalties of all its steps), normalised over the group's episodes and broadcast to its
steps. GiGPO adds a step term over *anchor-state groups*: steps of one group whose observation is identical,
compared through their discounted returns.

`cap_invalid` is applied after any estimator: it caps an invalid step's advantage at 0. Under the official step
score an invalid step of a won episode scores the win minus a small penalty, so it gets nearly the advantage of a
valid step and the update reinforces a response that broke the answer format.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "StepScores",
    "AdvantageParams",
    "group_normalise",
    "discounted_returns",
    "grpo_advantages",
    "gigpo_advantages",
    "cap_invalid",
    "ADVANTAGES",
    "INVALID_ADVANTAGES",
    "NORMS",
    "GROUPINGS",
]

NORMS = ("mean_std", "mean")
INVALID_ADVANTAGES = ("keep", "nonpositive")  # keep: official; nonpositive: cap_invalid
GROUPINGS = ("steps", "episodes")


@dataclass(frozen=True)
class StepScores:
    """One update's step samples, listed episode by episode (each episode's steps in order)."""

    episode: Sequence[int]  # episode index of each step sample
    group: Sequence[int]  # group of each step sample (its episode's group)
    step_score: Sequence[float]  # the step sample's score: its episode's outcome minus this step's penalty
    episode_score: Sequence[float]  # per episode: its outcome minus the penalties of all its steps
    step_reward: Sequence[float] = ()  # GiGPO: each step's own reward (discounted into returns)
    anchor: Sequence[str] = ()  # GiGPO: each step's anchor state (its observation text)


@dataclass(frozen=True)
class AdvantageParams:
    norm: str = "mean_std"  # mean_std: (s - mean) / (std + eps); mean: s - mean
    over: str = "steps"  # the samples a group's statistics run over: steps (official) or episodes
    eps: float = 1e-6
    step_weight: float = 1.0  # GiGPO: weight of the step term
    gamma: float = 0.95  # GiGPO: discount of the step returns


def group_normalise(
    scores: torch.Tensor, groups: Sequence[int], norm: str = "mean_std", eps: float = 1e-6, single: str = "zero"
) -> torch.Tensor:
    """Each score normalised by its group's mean (and unbiased std). A group holding one score gets
    `single` = "zero" (advantage 0) or "identity" (mean 0 and std 1, as the official code: the score itself)."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}; got {norm!r}")
    scores = torch.as_tensor(scores, dtype=torch.float64)
    if len(groups) != scores.shape[0]:
        raise ValueError("scores and groups must have the same length")
    members: dict[int, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        members[int(g)].append(i)
    out = torch.zeros_like(scores)
    for idx in members.values():
        s = scores[idx]
        if len(idx) < 2:
            mean, std = (0.0, 1.0) if single == "identity" else (s.mean(), None)
        else:
            mean, std = s.mean(), s.std(unbiased=True)
        centred = s - mean
        out[idx] = centred / (std + eps) if norm == "mean_std" and std is not None else centred
    return out.to(torch.float32)


def _episode_term(x: StepScores, p: AdvantageParams) -> torch.Tensor:
    """GRPO's advantage of every step sample."""
    if p.over not in GROUPINGS:
        raise ValueError(f"over must be one of {', '.join(GROUPINGS)}; got {p.over!r}")
    if p.over == "steps":
        return group_normalise(torch.tensor(x.step_score), x.group, p.norm, p.eps, single="identity")
    episode_group = {int(e): int(g) for e, g in zip(x.episode, x.group)}
    groups = [episode_group.get(e, -1 - e) for e in range(len(x.episode_score))]
    per_episode = group_normalise(torch.tensor(x.episode_score), groups, p.norm, p.eps, single="zero")
    return per_episode[torch.as_tensor(list(x.episode), dtype=torch.long)]


def grpo_advantages(x: StepScores, p: AdvantageParams) -> torch.Tensor:
    """Per-step GRPO advantages (over steps or episodes, see the module docstring)."""
    return _episode_term(x, p)


def discounted_returns(step_rewards: Sequence[float], gamma: float) -> list[float]:
    """G_t = r_t + gamma * G_{t+1}, computed backwards over one episode."""
    out, running = [0.0] * len(step_rewards), 0.0
    for t in range(len(step_rewards) - 1, -1, -1):
        running = step_rewards[t] + gamma * running
        out[t] = running
    return out


def gigpo_advantages(x: StepScores, p: AdvantageParams) -> torch.Tensor:
    """Per-step GiGPO advantages: the GRPO term + step_weight x the anchor-state term. Inside each anchor group
    (same group, same observation) the steps' discounted returns are normalised; an anchor group of one step gets a
    step term of 0."""
    n = len(x.episode)
    if not (len(x.anchor) == len(x.step_reward) == n):
        raise ValueError("gigpo needs one anchor and one step reward per step sample")
    steps_of: dict[int, list[int]] = defaultdict(list)
    for i, e in enumerate(x.episode):
        steps_of[int(e)].append(i)
    returns = [0.0] * n
    for idx in steps_of.values():
        for i, g in zip(idx, discounted_returns([x.step_reward[i] for i in idx], p.gamma)):
            returns[i] = g
    anchors: dict[tuple, list[int]] = defaultdict(list)
    for i in range(n):
        anchors[(int(x.group[i]), x.anchor[i])].append(i)
    keys = [0] * n
    for k, idx in enumerate(anchors.values()):
        for i in idx:
            keys[i] = k
    step_term = group_normalise(torch.tensor(returns), keys, p.norm, p.eps, single="zero")
    return _episode_term(x, p) + p.step_weight * step_term


def cap_invalid(advantages: torch.Tensor, valid: Sequence[bool]) -> torch.Tensor:
    """Each invalid step's advantage capped at 0 (valid steps untouched): an invalid response may be pushed down,
    never up."""
    valid_mask = torch.as_tensor(list(valid), dtype=torch.bool)
    if valid_mask.shape != advantages.shape:
        raise ValueError(f"one validity flag per advantage: {tuple(valid_mask.shape)} != {tuple(advantages.shape)}")
    return torch.where(valid_mask, advantages, advantages.clamp(max=0.0))


ADVANTAGES: dict[str, Callable[[StepScores, AdvantageParams], torch.Tensor]] = {
    "grpo": grpo_advantages,
    "gigpo": gigpo_advantages,
}
