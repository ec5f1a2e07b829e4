"""Teacher re-scoring: the same response ids under the skill prompt; OPID-style step skills reach their step only."""

import pytest

from seed.agent import render
from seed.models.backend import HFBackend
from seed.models.load import load_model, load_tokenizer
from seed.skills.rescore import rescore
from seed.types import StepSample, StepState


@pytest.fixture(scope="module")
def backend():
    tokenizer = load_tokenizer("tiny-random")
    return HFBackend(load_model("tiny-random", tokenizer), tokenizer, precision="fp32", seed=0)


def _samples(tokenizer, episode_ids):
    out = []
    for i, eid in enumerate(episode_ids):
        state = StepState("sokoban", "push the box onto the target", f"observation {i}", ["up", "down"], step_index=i)
        out.append(
            StepSample(
                state,
                render(state, tokenizer),
                tokenizer.encode("<action>up</action>"),
                [0.0] * 5,
                "<action>up</action>",
                "up",
                True,
                0.0,
                episode_id=eid,
                step_index=i,
            )
        )
    return out


def test_only_steps_with_a_skill_are_scored_and_step_skills_change_their_step_only(backend):
    tok = backend.tokenizer
    skill = "Push the box toward the target, never into a wall."
    samples = _samples(tok, ["a", "a", "b"])
    plain = rescore(backend, tok, samples, {"a": skill}, token_budget=4096)
    assert plain[2] is None and all(len(lp) == len(samples[0].response_ids) for lp in plain[:2])
    stepped = rescore(
        backend,
        tok,
        _samples(tok, ["a", "a", "b"]),
        {"a": skill},
        4096,
        step_skills={"a": {1: "Move down to reach the box."}},
    )
    assert stepped[0] == pytest.approx(plain[0], abs=1e-6)  # step 0 has no step skill: same teacher prompt
    assert max(abs(x - y) for x, y in zip(stepped[1], plain[1])) > 1e-5  # step 1 sees its own sentence


def empty_skill_shift(components) -> list[float]:
    """Teacher minus student log-prob of every sampled token when there is no skill (the teacher prompt is then
    the student prompt): the teacher scored by the distillation stage's engine, the student by the trainer."""
    from seed.train.distill import DistillStage

    tok = components.tokenizer
    stage = DistillStage(components)
    collector = components.collector("train")
    episodes = collector.collect(components.rollout_backend(), [0, 1], 2, components.rollout_sampling())
    collector.close()
    samples = [s for e in episodes for s in e.steps if s.response_ids]
    teacher_prompts = [render(s.state, tok, skill=None) for s in samples]
    assert teacher_prompts == [s.prompt_ids for s in samples]
    responses = [s.response_ids for s in samples]
    teacher = stage.teacher_backend.logprobs(teacher_prompts, responses, 4096)
    student = components.policy.logprobs([s.prompt_ids for s in samples], responses, 4096)
    return [t - s for ts, ss in zip(teacher, student) for t, s in zip(ts, ss)]


def test_an_empty_skill_shifts_no_token_on_the_trainer_engine(tmp_path):
    from seed.config import load_config
    from seed.train.components import build_components

    comps = build_components(load_config("tiny", [f"run_dir={tmp_path}", "distill.kind=seed"]))
    shift = empty_skill_shift(comps)
    assert shift and all(d == 0.0 for d in shift)
