"""Teacher re-scoring: the same response ids under the skill prompt; OPID-style step skills reach their step only."""
import pytest

from seed.agent import render
from seed.models.backend import HFBackend
from seed.models.load import load_model, load_tokenizer
from seed.rollout.types import StepSample, StepState
from seed.skills.rescore import rescore


@pytest.fixture(scope="module")
def backend():
    tokenizer = load_tokenizer("tiny-random")
    return HFBackend(load_model("tiny-random", tokenizer), tokenizer, precision="fp32", seed=0)


def _samples(tokenizer, episode_ids):
    out = []
    for i, eid in enumerate(episode_ids):
        state = StepState("sokoban", "push the box onto the target", f"observation {i}", ["up", "down"],
                          step_index=i)
        out.append(StepSample(state, render(state, tokenizer), tokenizer.encode("<action>up</action>"), [0.0] * 5,
                              "<action>up</action>", "up", True, 0.0, episode_id=eid, step_index=i))
    return out


def test_only_steps_with_a_skill_are_scored_and_step_skills_change_their_step_only(backend):
    tok = backend.tokenizer
    skill = "Push the box toward the target, never into a wall."
    samples = _samples(tok, ["a", "a", "b"])
    plain = rescore(backend, tok, samples, {"a": skill}, token_budget=4096)
    assert plain[2] is None and all(len(lp) == len(samples[0].response_ids) for lp in plain[:2])
    stepped = rescore(backend, tok, _samples(tok, ["a", "a", "b"]), {"a": skill}, 4096,
                      step_skills={"a": {2: "Move down to reach the box."}})
    assert stepped[0] == pytest.approx(plain[0], abs=1e-6)  # step 1 has no step skill: same teacher prompt
    assert max(abs(x - y) for x, y in zip(stepped[1], plain[1])) > 1e-5  # step 2 sees its own sentence
