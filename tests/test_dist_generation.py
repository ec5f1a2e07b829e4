"""Generation workers: replicas in Ray actors decode and score like the trainer's model, and follow its updates."""

import pytest
import torch

from seed.config import load_config
from seed.models import Sampling
from seed.train.components import build_components

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def components(tmp_path_factory):
    cfg = load_config("tiny", [f"run_dir={tmp_path_factory.mktemp('gen')}", "generation.workers=2"])
    comps = build_components(cfg)
    yield comps
    comps.remote.close()
    ray.shutdown()


def _prompts(tok):
    return [
        tok.encode(t)
        for t in ("push the box left", "the box is up", "target", "walk right then down", "a wall is near")
    ]


def test_workers_decode_and_score_like_the_trainer_model(components):
    remote, local, tok = components.rollout_backend(), components.policy, components.tokenizer
    assert remote is not local
    greedy = Sampling(greedy=True, max_new_tokens=8, stop=())
    here, there = local.generate(_prompts(tok), greedy), remote.generate(_prompts(tok), greedy)
    assert [g.ids for g in there] == [g.ids for g in here]  # split over 2 actors, returned in order
    responses = [g.ids for g in here]
    for a, b in zip(remote.logprobs(_prompts(tok), responses), local.logprobs(_prompts(tok), responses)):
        assert a == pytest.approx(b, abs=1e-5)


def test_weights_are_pushed_once_after_every_update(components):
    remote, local, tok = components.rollout_backend(), components.policy, components.tokenizer
    responses = [g.ids for g in local.generate(_prompts(tok), Sampling(greedy=True, max_new_tokens=6, stop=()))]
    remote.logprobs(_prompts(tok), responses)
    pushes = remote.pushes
    remote.logprobs(_prompts(tok), responses)
    assert remote.pushes == pushes  # unchanged weights are not sent again
    opt = torch.optim.SGD(local.model.parameters(), lr=0.5)
    logp, mask, _ = local.forward_logps(_prompts(tok), responses)
    (-(logp * mask).sum()).backward()
    opt.step()
    after = remote.logprobs(_prompts(tok), responses)
    assert remote.pushes == pushes + 1
    for a, b in zip(after, local.logprobs(_prompts(tok), responses)):
        assert a == pytest.approx(b, abs=1e-5)


def test_teacher_rescores_on_the_trainer_engine_so_an_empty_skill_shifts_no_token(components):
    """The workers' log-probs differ from the trainer's in the last digits (above); the teacher re-score must not
    carry that offset into delta."""
    from test_rescore import empty_skill_shift

    shift = empty_skill_shift(components)
    assert shift and all(d == 0.0 for d in shift)
