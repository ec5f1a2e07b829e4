"""The teacher-signal metrics and the pieces behind them, against numbers checked by hand."""

import pytest
import torch

from seed.agent import action_token_mask, render
from seed.algos import opd_loss
from seed.algos.distill import DistillParams, DistillTokens, positive_loss
from seed.algos.signal import SampleShift, agreement_auc, auc, signal_metrics, signal_sums
from seed.envs import make
from seed.skills.sources import SiblingAnalyzer, compact_episode, sibling_contexts
from seed.skills.teachers import expert_moves
from seed.types import Episode, StepSample, StepState


def test_action_tokens_are_the_ones_inside_the_action_block():
    tokens = ["<think>", "go", "</think>", "<act", "ion>le", "ft", "</action>", "<|im_end|>"]
    assert action_token_mask(tokens) == [False, False, False, False, True, True, False, False]
    assert action_token_mask(["<action>", "</action>"]) == [False, False]  # an empty action has no tokens
    assert action_token_mask(["<think>", "no action"]) == [False, False]


def test_auc_by_hand():
    assert auc([0.9, 0.8, 0.1], [True, True, False]) == 1.0
    assert auc([0.1, 0.8, 0.9], [True, True, False]) == 0.0
    # pairs (pos, neg): (0.5, 0.5) tie counts half, (0.7, 0.5) correct -> (0.5 + 1) / 2
    assert auc([0.5, 0.7, 0.5], [True, True, False]) == 0.75
    assert auc([0.3], [True]) is None


def test_signal_metrics_split_action_tokens_outcome_advantage_and_expert_agreement_by_hand():
    agree = SampleShift([0.5, 1.0, -0.2], [False, True, False], won=True, advantage=1.2, agrees=True)
    disagree = SampleShift([0.1, -0.5, 0.3], [False, True, False], won=False, advantage=-0.4, agrees=False)
    no_expert = SampleShift([0.2, 0.4], [False, True], won=False, advantage=0.0, agrees=None)
    rows = [agree, disagree, no_expert]
    m = signal_metrics(signal_sums(rows), agreement_auc(rows))
    assert m["teacher/action/delta"] == pytest.approx((1.0 - 0.5 + 0.4) / 3)
    assert m["teacher/rest/delta"] == pytest.approx((0.5 - 0.2 + 0.1 + 0.3 + 0.2) / 5)
    assert m["teacher/action/gate_open"] == pytest.approx(2 / 3)  # gate > 0.5 exactly where delta > 0
    assert m["teacher/rest/gate_open"] == pytest.approx(4 / 5)
    assert m["teacher/action/success/delta"] == pytest.approx(1.0)
    assert m["teacher/action/failure/delta"] == pytest.approx((-0.5 + 0.4) / 2)
    assert m["teacher/action/adv_pos/delta"] == pytest.approx(1.0)
    assert m["teacher/action/adv_neg/delta"] == pytest.approx(-0.5)  # advantage 0 is in neither
    assert m["teacher/skill_lift"] == pytest.approx(1.0 - (-0.5))
    assert m["teacher/agree_auc"] == 1.0
    assert "teacher/action/agree/delta" in m and "teacher/rest/adv_pos/delta" in m


def test_positive_averages_over_the_tokens_the_skill_raised_over_the_rollout_weights():
    logp = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    old = torch.tensor([[-1.2, -1.5, -3.5]])
    teacher = torch.tensor([[-1.1, -1.9, -3.0]])  # raised over old on tokens 0 and 2, not 1
    term = positive_loss(DistillTokens(logp, teacher, old, torch.ones(1, 3)), DistillParams(beta=5.0))
    assert term.active.tolist() == [[1.0, 0.0, 1.0]]
    loss, stats = opd_loss(logp, teacher, torch.ones(1, 3), kind="positive", old_logp=old)
    assert stats["active_tokens"] == 2
    # token 0 is active (raised over old) though the student now rates it above the teacher: delta = -0.1
    g0 = torch.sigmoid(torch.tensor(5 * -0.1)).item()
    assert loss.item() == pytest.approx((g0 * -0.1 + 0.5 * 0.0) / 2, rel=1e-5)


def _episode(eid, group, won, actions):
    st = StepState(
        "sokoban",
        "push the box onto the target",
        "grid\nThe box is 1 step up from you; more.",
        ["up", "down", "left", "right"],
    )
    steps = [
        StepSample(st, [1], [2], [0.0], f"<action>{a}</action>", a, True, 0.0, eid, group, i)
        for i, a in enumerate(actions)
    ]
    return Episode(eid, group, 0, st.task, "sokoban", steps=steps, won=won)


def test_sibling_context_is_another_success_of_the_same_group():
    a, b, c = _episode("a", 0, True, ["left", "up"]), _episode("b", 0, False, ["down"]), _episode("c", 1, True, ["up"])
    assert compact_episode(a) == (
        "A successful attempt at this task from the same start took 2 steps: "
        "when 'The box is 1 step up from you', take 'left'; "
        "then when 'The box is 1 step up from you', take 'up'."
    )
    contexts = sibling_contexts([a, b, c])
    assert contexts == [None, compact_episode(a), None]  # a's only sibling success is itself; c is alone
    analyses = SiblingAnalyzer().analyse([a, b, c])
    assert [x.skill for _, x in analyses] == [None, compact_episode(a), None]


def test_expert_moves_replay_the_episode_next_to_the_expert():
    env = make("sokoban", size=6, num_boxes=1, reverse_steps=4)
    env.reset(3)
    plan = env.expert_plan()
    wrong = next(m for m in ("up", "down", "left", "right") if m != plan[0])
    ep = _episode("e", 0, False, [wrong])
    ep.task_seed = 3
    moves = expert_moves(env, ep, "format")
    assert moves == [plan[0]]
    env.reset(3)
    env.step(wrong)
    ep.steps.append(_episode("x", 0, False, ["up"]).steps[0])
    assert expert_moves(env, ep, "format")[1] == (env.expert_plan() or [None])[0]


def test_an_empty_context_renders_the_block_and_no_context_renders_none():
    from seed.models import load_tokenizer

    tok = load_tokenizer("tiny-random")
    st = StepState("sokoban", "push the box", "grid", ["up"])
    plain, empty = render(st, tok), render(st, tok, skill="")
    assert render(st, tok, skill=None) == plain and len(empty) > len(plain)
    assert "[]" in tok.decode(empty)
