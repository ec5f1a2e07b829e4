"""`seed probe` and the skill-following warm-up on the tiny model and the real Sokoban env."""
import json
import math

import pytest

from seed.cli import main
from seed.config import load_config
from seed.envs import make
from seed.rollout.types import StepSample, StepState
from seed.train.components import build_components
from seed.train.probe import CONTEXTS, ProbeState, continuation, run_probe, summarise
from seed.train.warmup import demonstrations


@pytest.fixture(scope="module")
def comps(tmp_path_factory):
    run = tmp_path_factory.mktemp("probe") / "run"
    return build_components(load_config("tiny", [f"run_dir={run}"]), with_reference=False)


def _state(expert, sampled, response="<think>x</think><action>up</action>"):
    st = StepState("sokoban", "t", "o", ["up", "down"])
    return ProbeState(StepSample(st, [], [], [], response, sampled, True, 0.0), None, "policy", expert)


def test_summary_by_hand():
    panel = [_state("up", "down"), _state("up", "up"), _state("left", "down")]
    scores = {"plain": [(-1.0, -2.0), (-1.0, -1.0), (-3.0, -0.5)],
              "oracle": [(-0.5, -2.5), (-0.2, -0.2), None]}  # the third state has no oracle context
    r = summarise(panel, scores)["oracle"]
    assert r["n"] == 2 and r["n_differ"] == 1
    assert r["expert_delta_mean"] == pytest.approx((0.5 + 0.8) / 2)
    assert r["expert_delta_se"] == pytest.approx(math.sqrt(((0.5 - 0.65) ** 2 + (0.8 - 0.65) ** 2) / 1 / 2))
    assert r["sampled_delta_mean"] == pytest.approx((-0.5 + 0.8) / 2)
    assert r["prefers_expert_share"] == 1.0  # where the actions differ the context raised the expert's more


def test_continuation_keeps_the_policy_thought_and_spans_the_action(comps):
    tok = comps.tokenizer
    ids, start, end = continuation(tok, _state("left", "up"), "left")
    assert tok.decode(ids[:start]) == "<think>x</think><action>"
    assert tok.decode(ids[start:end]) == "left" and tok.decode(ids[end:]) == "</action>"
    _, s2, e2 = continuation(tok, _state("left", "", response="garbled"), "left")
    assert e2 > s2  # no action block: a restated situation and the tag stand in for the thought


def test_probe_scores_every_context_and_the_cli_writes_its_json(comps, tmp_path, capsys):
    result = run_probe(comps, n_states=8, group_size=2)
    assert set(result["contexts"]) == set(CONTEXTS)
    panel = result["panel"]
    assert panel["states"] == 8 and panel["from_expert"] == 4 and panel["from_policy"] == 4
    for name in ("oracle", "privileged", "empty", "shuffled"):  # the oracle writes a skill for every episode
        assert result["contexts"][name]["n"] == 8
    assert result["contexts"]["sibling"]["n"] <= 8
    assert math.isfinite(result["contexts"]["empty"]["expert_delta_mean"])
    run = tmp_path / "cli"
    out = tmp_path / "probe.json"
    assert main(["probe", "tiny", f"run_dir={run}", "--states", "4", "--group-size", "2",
                 "--contexts", "oracle", "empty", "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert set(saved["contexts"]) == {"oracle", "empty"}
    assert set(saved["contexts"]["oracle"]) >= {"expert_delta_mean", "expert_delta_se", "sampled_delta_mean",
                                                "sampled_delta_se", "prefers_expert_share", "n"}
    assert "expert Δ" in capsys.readouterr().out
    assert main(["probe", "tiny", "--contexts", "nonsense"]) == 1


def test_skill_demonstrations_follow_the_oracle_workflow_in_the_prompt(comps):
    tok = comps.tokenizer
    plain = demonstrations(comps, 4, seed=7)
    skilled = demonstrations(comps, 4, seed=7, skill_share=1.0)
    assert all("Episode-Level Skill" not in tok.decode(p) for p, _ in plain)
    env = make("sokoban")
    for p, r in skilled:
        text = tok.decode(p)
        assert "Episode-Level Skill" in text and "take the shortest route:" in text
    first_prompt = tok.decode(skilled[0][0])
    env.reset(10_000_000 + 7)
    plan = env.expert_plan()[:comps.cfg.env.max_steps]
    assert f"route: {'; '.join(plan)}." in first_prompt  # the demonstrated episode's own plan
    assert f"<action>{plan[0]}</action>" in tok.decode(skilled[0][1])
    assert demonstrations(comps, 4, seed=7, skill_share=0.0) == plain  # no draw at 0: plain demos unchanged
