"""Advantages and losses against numbers computed by hand."""
import math

import pytest
import torch

from seed.algos import discounted_returns, entropy_from_logits, gigpo_advantages, grpo_advantages, kl_k3, ppo_clip_loss


def test_grpo_mean_std_by_hand():
    # group 0: rewards 10, 0, 0 -> mean 10/3, unbiased std sqrt(100/3) = 5.7735
    adv = grpo_advantages(torch.tensor([10.0, 0.0, 0.0, 5.0]), [0, 0, 0, 1], eps=0.0)
    assert adv[0].item() == pytest.approx((10 - 10 / 3) / math.sqrt(100 / 3), rel=1e-6)
    assert adv[1].item() == pytest.approx((0 - 10 / 3) / math.sqrt(100 / 3), rel=1e-6)
    assert adv[3].item() == 0.0  # a group of one gets 0


def test_grpo_mean_and_equal_rewards():
    adv = grpo_advantages(torch.tensor([1.0, 3.0, 2.0, 2.0]), [0, 0, 1, 1], norm="mean")
    assert adv.tolist() == [-1.0, 1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="mean_std"):
        grpo_advantages(torch.tensor([1.0]), [0], norm="bad")


def test_discounted_returns():
    assert discounted_returns([0.0, 0.0, 10.0], 0.5) == [2.5, 5.0, 10.0]


def test_gigpo_step_term_by_hand():
    # two episodes in one group; both start in observation "A"; episode 0 wins at its 2nd step
    episode_rewards = torch.tensor([10.0, 0.0])
    adv = gigpo_advantages(episode_rewards, [0, 0], step_episode_index=[0, 0, 1, 1],
                           step_anchor_keys=["A", "B", "A", "C"], step_rewards=[0.0, 10.0, 0.0, 0.0],
                           step_weight=1.0, gamma=0.5, eps=0.0)
    ep = (10 - 5) / math.sqrt(50)  # episode term: +0.7071 for episode 0, -0.7071 for episode 1
    # anchor "A": returns 5 (= 0.5*10) and 0 -> +0.7071 / -0.7071; "B" and "C" are singletons -> 0
    assert adv[0].item() == pytest.approx(ep + ep, rel=1e-5)
    assert adv[1].item() == pytest.approx(ep, rel=1e-5)
    assert adv[2].item() == pytest.approx(-2 * ep, rel=1e-5)
    assert adv[3].item() == pytest.approx(-ep, rel=1e-5)


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
