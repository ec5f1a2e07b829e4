"""Distillation losses against hand-computed values and gradients."""

import math

import pytest
import torch

from seed.algos import opd_loss, opid_shaping


def _sig(x):
    return 1 / (1 + math.exp(-x))


def test_seed_loss_value_and_gradient_by_hand():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    teacher = torch.tensor([[-0.5, -2.5]])
    mask = torch.ones(1, 2)
    loss, stats = opd_loss(logp, teacher, mask, kind="seed", beta=5.0)
    g1, g2 = _sig(5 * 0.5), _sig(5 * -0.5)
    assert loss.item() == pytest.approx((g1 * 0.5 + g2 * -0.5) / 2, rel=1e-6)
    loss.backward()
    # grad = -g / n_active per token: a gate-weighted NLL; never pushes a sampled token down
    assert logp.grad.tolist()[0] == pytest.approx([-g1 / 2, -g2 / 2], rel=1e-6)
    assert stats["delta_mean"] == pytest.approx(0.0) and stats["gate_mean"] == pytest.approx((g1 + g2) / 2)
    assert stats["active_tokens"] == 2


def test_positive_keeps_only_positive_delta():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    loss, stats = opd_loss(logp, torch.tensor([[-0.5, -2.5]]), torch.ones(1, 2), kind="positive", beta=5.0)
    assert stats["active_tokens"] == 1
    assert loss.item() == pytest.approx(_sig(2.5) * 0.5, rel=1e-6)


def test_opsd_is_delta_weighted_policy_gradient():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    loss, _ = opd_loss(logp, torch.tensor([[-0.5, -2.5]]), torch.ones(1, 2), kind="opsd")
    loss.backward()
    assert logp.grad.tolist()[0] == pytest.approx([-0.5 / 2, 0.5 / 2])


def test_skill_sd_importance_weighted_reverse_kl():
    logp = torch.tensor([[-1.0]], requires_grad=True)
    old = torch.tensor([[-1.2]])
    loss, _ = opd_loss(logp, torch.tensor([[-0.7]]), torch.ones(1, 1), kind="skill_sd", old_logp=old)
    assert loss.item() == pytest.approx(math.exp(0.2) * (-1.2 + 0.7), rel=1e-6)


def test_no_active_token_gives_zero_not_nan():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    for kind in ("seed", "opsd", "positive", "skill_sd"):
        loss, stats = opd_loss(logp, torch.zeros(1, 2), torch.zeros(1, 2), kind=kind)
        assert loss.item() == 0.0 and not math.isnan(stats["gate_mean"])
    with pytest.raises(ValueError, match="allowed: seed, opsd, positive, skill_sd"):
        opd_loss(logp, logp, torch.ones(1, 2), kind="kl")


def test_opid_shaping_adds_weighted_delta():
    out = opid_shaping(torch.tensor([1.0]), torch.tensor([[2.0, -1.0]]), w=0.001)
    assert out.tolist()[0] == pytest.approx([1.002, 0.999])
