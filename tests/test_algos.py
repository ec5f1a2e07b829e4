"""Advantages and losses against numbers computed by hand."""

import math

import pytest
import torch

from seed.algos import (
    ADVANTAGES,
    AdvantageParams,
    StepScores,
    cap_invalid,
    discounted_returns,
    entropy_from_logits,
    gigpo_advantages,
    group_normalise,
    grpo_advantages,
    kl_k3,
    ppo_clip_loss,
)
from seed.train.rl import step_scores
from seed.types import Episode, StepSample, StepState


def _episode(gid, n_steps, won, invalid_at=()):
    steps = [
        StepSample(StepState("sokoban", "t", f"obs {i}", []), [1], [2], [0.0], "", "up", i not in invalid_at, 0.0)
        for i in range(n_steps)
    ]
    return Episode(
        f"e{gid}-{n_steps}-{won}", 0, 0, "t", "sokoban", steps=steps, won=won, score=10.0 * won - 0.1 * len(invalid_at)
    )


# the group of four: won in 3 steps with 1 invalid, won in 10, lost after 30 with 5 invalid, lost after 30
FOUR = [
    _episode(0, 3, True, invalid_at=(1,)),
    _episode(1, 10, True),
    _episode(2, 30, False, invalid_at=range(5)),
    _episode(3, 30, False),
]


def test_grpo_over_steps_by_hand():
    # 73 step samples; scores 10 (12 of them), 9.9 (the invalid step of the 3-step win), -0.1 (5), 0 (55):
    # mean 129.4 / 73 = 1.7726, unbiased std 3.85264 (statistics.stdev of those 73 numbers)
    adv = grpo_advantages(step_scores(FOUR, 0.1), AdvantageParams(over="steps", eps=0.0))
    assert adv.shape == (73,)
    assert adv[0].item() == pytest.approx(2.1355209, rel=1e-5)  # a valid step of a win
    assert adv[1].item() == pytest.approx(2.1095646, rel=1e-5)  # the invalid step of a win: its own penalty only
    assert adv[13].item() == pytest.approx(-0.4860568, rel=1e-5)  # an invalid step of the 30-step loss
    assert adv[18].item() == pytest.approx(-0.4601006, rel=1e-5)  # a valid step of a loss
    assert adv[-1].item() == pytest.approx(-0.4601006, rel=1e-5)


def test_grpo_over_episodes_by_hand():
    # episode scores 9.9, 10, -0.5, 0: normalised over the four episodes, broadcast to their steps
    adv = grpo_advantages(step_scores(FOUR, 0.1), AdvantageParams(over="episodes", eps=0.0))
    expected = [0.8569997, 0.8739700, -0.9079106, -0.8230591]
    per_step = [expected[i] for i, e in enumerate(FOUR) for _ in e.steps]
    assert adv.tolist() == pytest.approx(per_step, rel=1e-5)


def test_single_score_group_is_mean_zero_std_one_over_steps_and_zero_over_episodes():
    lone = [_episode(0, 2, True, invalid_at=(0,))]  # step scores 9.9 and 10: two samples, one group
    two = grpo_advantages(step_scores(lone, 0.1), AdvantageParams(over="steps", eps=0.0))
    assert two.tolist() == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2)], rel=1e-5)
    one = [_episode(0, 1, True)]
    assert grpo_advantages(step_scores(one, 0.1), AdvantageParams(over="steps")).tolist() == pytest.approx([10.0])
    assert grpo_advantages(step_scores(one, 0.1), AdvantageParams(over="episodes")).tolist() == [0.0]


def test_cap_invalid_never_reinforces_an_invalid_step_by_hand():
    valid = [s.valid for e in FOUR for s in e.steps]
    official = grpo_advantages(step_scores(FOUR, 0.1), AdvantageParams(over="steps", eps=0.0))
    capped = cap_invalid(official, valid)
    assert official[1].item() == pytest.approx(2.1095646, rel=1e-5)  # the invalid step of the 3-step win...
    assert capped[1].item() == 0.0  # ...is no longer pushed up
    assert capped[13].item() == pytest.approx(-0.4860568, rel=1e-5)  # an invalid step of a loss keeps its push down
    unchanged = [i for i in range(len(valid)) if i != 1]
    assert capped[unchanged].tolist() == official[unchanged].tolist()
    by_episode = cap_invalid(grpo_advantages(step_scores(FOUR, 0.1), AdvantageParams(over="episodes")), valid)
    assert by_episode[:3].tolist() == pytest.approx([0.8569997, 0.0, 0.8569997], rel=1e-5)
    with pytest.raises(ValueError, match="one validity flag per advantage"):
        cap_invalid(official, valid[:-1])


def test_group_normalise_mean_and_bad_values():
    adv = group_normalise(torch.tensor([1.0, 3.0, 2.0, 2.0]), [0, 0, 1, 1], norm="mean")
    assert adv.tolist() == [-1.0, 1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="mean_std"):
        group_normalise(torch.tensor([1.0]), [0], norm="bad")
    with pytest.raises(ValueError, match="steps, episodes"):
        grpo_advantages(step_scores(FOUR, 0.1), AdvantageParams(over="tokens"))


def test_every_registered_estimator_has_one_signature():
    x = step_scores(FOUR, 0.1)
    for name, estimator in ADVANTAGES.items():
        adv = estimator(x, AdvantageParams())
        assert adv.shape == (73,) and torch.isfinite(adv).all(), name


def test_discounted_returns():
    assert discounted_returns([0.0, 0.0, 10.0], 0.5) == [2.5, 5.0, 10.0]


def test_gigpo_step_term_by_hand():
    # two episodes in one group; both start in observation "A"; episode 0 wins at its 2nd step
    x = StepScores(
        episode=[0, 0, 1, 1],
        group=[0, 0, 0, 0],
        step_score=[10.0, 10.0, 0.0, 0.0],
        episode_score=[10.0, 0.0],
        step_reward=[0.0, 10.0, 0.0, 0.0],
        anchor=["A", "B", "A", "C"],
    )
    adv = gigpo_advantages(x, AdvantageParams(over="episodes", step_weight=1.0, gamma=0.5, eps=0.0))
    ep = (10 - 5) / math.sqrt(50)  # episode term: +0.7071 for episode 0, -0.7071 for episode 1
    # anchor "A": returns 5 (= 0.5*10) and 0 -> +0.7071 / -0.7071; "B" and "C" are singletons -> 0
    assert adv[0].item() == pytest.approx(ep + ep, rel=1e-5)
    assert adv[1].item() == pytest.approx(ep, rel=1e-5)
    assert adv[2].item() == pytest.approx(-2 * ep, rel=1e-5)
    assert adv[3].item() == pytest.approx(-ep, rel=1e-5)
    # over steps the episode term is the step samples' GRPO: scores 10, 10, 0, 0 -> +-0.866
    steps = gigpo_advantages(x, AdvantageParams(over="steps", step_weight=0.0, eps=0.0))
    assert steps.tolist() == pytest.approx([5 / math.sqrt(100 / 3)] * 2 + [-5 / math.sqrt(100 / 3)] * 2, rel=1e-5)


def test_ppo_clip_loss_by_hand():
    logp = torch.log(torch.tensor([[0.5, 0.5]]))
    old = torch.log(torch.tensor([[0.25, 0.5]]))  # ratios 2.0 and 1.0
    mask = torch.tensor([[1.0, 1.0]])
    loss, stats = ppo_clip_loss(logp, old, torch.tensor([1.0]), mask, clip=0.2)
    # token 1: min(2*1, 1.2*1) = 1.2; token 2: 1.0 -> loss = -(1.2 + 1.0)/2
    assert loss.item() == pytest.approx(-1.1, rel=1e-6)
    assert stats["clip_frac"] == pytest.approx(0.5)
    loss_neg, _ = ppo_clip_loss(logp, old, torch.tensor([-1.0]), mask, clip=0.2)
    # negative advantage: min(-2, -1.2) = -2; token 2: -1 -> loss = (2 + 1)/2
    assert loss_neg.item() == pytest.approx(1.5, rel=1e-6)


def test_dual_clip_bounds_negative_advantages_by_hand():
    logp = torch.log(torch.tensor([[0.8]]))
    old = torch.log(torch.tensor([[0.2]]))  # ratio 4 > c = 3
    loss, stats = ppo_clip_loss(logp, old, torch.tensor([-1.0]), torch.ones(1, 1), clip=0.2, clip_ratio_c=3.0)
    assert loss.item() == pytest.approx(3.0, rel=1e-6)  # min(max(4, 1.2), 3) * 1
    assert stats["dual_clip_frac"] == 1.0
    plain, _ = ppo_clip_loss(logp, old, torch.tensor([-1.0]), torch.ones(1, 1), clip=0.2, clip_ratio_c=0.0)
    assert plain.item() == pytest.approx(4.0, rel=1e-6)
    positive, _ = ppo_clip_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1), clip=0.2, clip_ratio_c=3.0)
    assert positive.item() == pytest.approx(-1.2, rel=1e-6)  # positive advantages: the ordinary clip


def test_ppo_loss_masks_padding_and_empty_mask_is_zero():
    logp = torch.tensor([[0.0, 100.0]])
    loss, _ = ppo_clip_loss(logp, logp, torch.tensor([2.0]), torch.tensor([[1.0, 0.0]]))
    assert loss.item() == pytest.approx(-2.0)
    empty, _ = ppo_clip_loss(logp, logp, torch.tensor([2.0]), torch.zeros(1, 2))
    assert empty.item() == 0.0 and not torch.isnan(empty)


def test_kl_k3_by_hand_and_clamp():
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    x = math.log(0.25) - math.log(0.5)
    assert kl_k3(logp, ref).item() == pytest.approx(math.exp(x) - x - 1, rel=1e-6)
    assert kl_k3(torch.tensor([0.0]), torch.tensor([0.0])).item() == 0.0
    assert kl_k3(torch.tensor([-30.0]), torch.tensor([0.0])).item() == 10.0


def test_entropy_uniform():
    ent = entropy_from_logits(torch.zeros(1, 4))
    assert ent.item() == pytest.approx(math.log(4), rel=1e-6)
