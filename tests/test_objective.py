"""The RL objective L = L_PPO + kl_coef KL - entropy_coef H + distill_coef L_OPD, and the mini-batch plan."""

import math
import random

import pytest
import torch

from seed.algos import DISTILL_LOSSES, DistillParams, ObjectiveParams, PolicyLossParams, TokenTensors, rl_objective
from seed.train.rl import mini_batch_plan


def _tokens(n_rows=3, width=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand((n_rows, width), generator=g) - 0.1
    mask = torch.ones(n_rows, width)
    mask[0, 3] = 0  # row 0 is one token shorter
    return TokenTensors(
        logp=logp,
        old_logp=logp - 0.05,
        advantage=torch.tensor([1.0, -0.5, 2.0]),
        mask=mask,
        ref_logp=logp + 0.1,
        entropy=torch.full((n_rows, width), 0.7),
        teacher_logp=logp + 0.2,
        skill_mask=mask * torch.tensor([[1.0], [0.0], [1.0]]),
    )


PARAMS = ObjectiveParams(
    policy=PolicyLossParams(clip=0.2, clip_ratio_c=3.0),
    kl_coef=0.01,
    entropy_coef=0.001,
    distill="seed",
    distill_coef=0.01,
    distill_params=DistillParams(beta=5.0),
)


def test_objective_by_hand():
    t = _tokens()
    tokens, active = float(t.mask.sum()), float(t.skill_mask.sum())
    loss, stats = rl_objective(t, PARAMS, tokens, active)
    ratio = math.exp(0.05)  # every token: logp - old = 0.05 -> inside the clip range
    adv_tokens = [1.0] * 3 + [-0.5] * 4 + [2.0] * 4
    pg = sum(-ratio * a for a in adv_tokens) / tokens
    x = 0.1  # ref - logp
    kl = math.exp(x) - x - 1
    gate = 1 / (1 + math.exp(-5 * 0.2))
    opd = gate * 0.2  # every active token: gate * (teacher - student)
    expected = pg + 0.01 * kl - 0.001 * 0.7 + 0.01 * opd
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert stats.pg_loss == pytest.approx(pg, rel=1e-5) and stats.kl == pytest.approx(kl, rel=1e-4)
    assert stats.active_tokens == active and stats.delta_sum / active == pytest.approx(0.2, rel=1e-5)
    assert stats.gate_sum / active == pytest.approx(gate, rel=1e-5)


def _rows(t: TokenTensors, rows):
    pick = lambda x: None if x is None else x[rows]  # noqa: E731
    return TokenTensors(**{k: pick(getattr(t, k)) for k in t.__dataclass_fields__})


def test_micro_batches_add_up_to_the_mini_batch():
    t = _tokens()
    tokens, active = float(t.mask.sum()), float(t.skill_mask.sum())
    whole, whole_stats = rl_objective(t, PARAMS, tokens, active)
    a, sa = rl_objective(_rows(t, [0]), PARAMS, tokens, active)
    b, sb = rl_objective(_rows(t, [1, 2]), PARAMS, tokens, active)
    assert (a + b).item() == pytest.approx(whole.item(), rel=1e-6)
    assert (sa + sb).opd_loss == pytest.approx(whole_stats.opd_loss, rel=1e-6)


def test_every_distillation_kind_runs_through_the_objective_and_opid_only_shifts_the_advantage():
    t = _tokens()
    for kind in DISTILL_LOSSES:
        loss, stats = rl_objective(t, ObjectiveParams(distill=kind), 11, 7)
        assert torch.isfinite(loss), kind
    plain, _ = rl_objective(t, ObjectiveParams(distill="none", kl_coef=0, entropy_coef=0), 11, 7)
    opid, stats = rl_objective(
        t,
        ObjectiveParams(distill="opid", kl_coef=0, entropy_coef=0, distill_params=DistillParams(opid_weight=0.5)),
        11,
        7,
    )
    assert stats.opd_loss == 0.0
    # rows 0 and 2 have skills: their advantage rises by 0.5 * 0.2 on every token, ratio e^0.05
    assert (opid - plain).item() == pytest.approx(-math.exp(0.05) * 0.1 * 7 / 11, rel=1e-5)


def test_gradient_of_the_distillation_term_is_minus_gate_times_grad_logp():
    t = _tokens()
    logp = t.logp.clone().requires_grad_(True)
    t = TokenTensors(
        logp=logp,
        old_logp=t.old_logp,
        advantage=torch.zeros(3),
        mask=t.mask,
        teacher_logp=t.teacher_logp,
        skill_mask=t.skill_mask,
    )
    loss, _ = rl_objective(t, ObjectiveParams(distill="seed", distill_coef=1.0, kl_coef=0, entropy_coef=0), 11, 7)
    loss.backward()
    gate = 1 / (1 + math.exp(-5 * 0.2))
    assert logp.grad[0, 0].item() == pytest.approx(-gate / 7, rel=1e-5)
    assert logp.grad[1, 0].item() == 0.0  # no skill: no distillation gradient (advantage 0: no policy gradient)


@pytest.mark.parametrize(
    "n,size,pad,steps,last",
    [(73, 16, True, 5, 16), (73, 16, False, 5, 9), (64, 16, True, 4, 16), (10, 256, True, 1, 10), (73, 0, True, 1, 73)],
)
def test_mini_batch_count_follows_the_batch_size(n, size, pad, steps, last):
    plan = mini_batch_plan(n, size, pad, random.Random(0))
    assert len(plan) == steps and len(plan[-1]) == last
    assert set(i for chunk in plan for i in chunk) == set(range(n))  # every sample is trained on
    assert sum(map(len, plan)) == (n + (-n % size) if pad and 0 < size < n else n)
    assert plan == mini_batch_plan(n, size, pad, random.Random(0))  # deterministic for a seed
