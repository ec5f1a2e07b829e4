"""`seed probe` and the skill-following warm-up on the tiny model and the real Sokoban env."""

import json
import math

import pytest

from seed.agent import situation
from seed.cli import main
from seed.config import load_config
from seed.train.components import build_components
from seed.train.probe import CONTEXTS, ProbeState, continuation, run_probe, summarise
from seed.train.warmup import demonstrations
from seed.types import StepSample, StepState


@pytest.fixture(scope="module")
def comps(tmp_path_factory):
    run = tmp_path_factory.mktemp("probe") / "run"
    return build_components(load_config("tiny", [f"run_dir={run}"]), with_reference=False)


def _state(expert, sampled, response="<think>x</think><action>up</action>", source="policy"):
    st = StepState("sokoban", "t", "o", ["up", "down"])
    return ProbeState(StepSample(st, [], [], [], response, sampled, True, 0.0), None, source, expert)


def test_summary_by_hand():
    panel = [_state("up", "down", source="expert"), _state("up", "up"), _state("left", "down")]
    scores = {
        "plain": [(-1.0, -2.0), (-1.0, -1.0), (-3.0, -0.5)],
        "oracle": [(-0.5, -2.5), (-0.2, -0.2), None],
    }  # the third state has no oracle context
    r = summarise(panel, scores)["oracle"]
    assert r["n"] == 2 and r["n_differ"] == 1
    assert r["expert_delta_mean"] == pytest.approx((0.5 + 0.8) / 2)
    assert r["expert_delta_se"] == pytest.approx(math.sqrt(((0.5 - 0.65) ** 2 + (0.8 - 0.65) ** 2) / 1 / 2))
    assert r["sampled_delta_mean"] == pytest.approx((-0.5 + 0.8) / 2)
    assert r["prefers_expert_share"] == 1.0  # where the actions differ the context raised the expert's more
    assert r["by_source"]["expert"] == {"expert_delta_mean": pytest.approx(0.5), "expert_delta_se": 0.0, "n": 1}
    assert r["by_source"]["policy"]["expert_delta_mean"] == pytest.approx(0.8)
    # the first state's observation ("o") is named by its context's rule, the second's is not
    texts = {"oracle": ["What works: when 'o', take 'up'.", "when 'other', take 'up'", None]}
    rule = summarise(panel, scores, texts)["oracle"]["by_rule"]
    assert rule["named"] == {"expert_delta_mean": pytest.approx(0.5), "expert_delta_se": 0.0, "n": 1}
    assert rule["not_named"]["expert_delta_mean"] == pytest.approx(0.8) and rule["not_named"]["n"] == 1


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
    assert result["examples"]["empty"] == [] and 1 <= len(result["examples"]["oracle"]) <= 4
    assert all(" take '" in text for text in result["examples"]["privileged"])  # the expert's route as rules
    panel = result["panel"]
    assert panel["states"] == 8 and panel["from_expert"] == 4 and panel["from_policy"] == 4
    for name in ("oracle", "privileged", "empty", "shuffled"):  # the oracle writes a skill for every episode
        assert result["contexts"][name]["n"] == 8
    assert result["contexts"]["sibling"]["n"] <= 8
    assert math.isfinite(result["contexts"]["empty"]["expert_delta_mean"])
    # 7 prompts per state at most (plain + 6 contexts), each scored once, each longer than its continuations
    assert 8 * 2 * 10 < result["scoring"]["tokens"] and result["scoring"]["tokens_per_s"] > 0
    run = tmp_path / "cli"
    out = tmp_path / "probe.json"
    assert main(["start", "tiny", f"run_dir={run}", "warmup.skill_share=0.5"]) == 0  # the start point alone
    assert (run / "stage_warmup.json").exists() and not (run / "metrics.jsonl").read_text().count('"rollout/')
    assert (
        main(
            [
                "probe",
                str(run),
                "--states",
                "4",
                "--group-size",
                "2",
                "--contexts",
                "oracle",
                "empty",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    saved = json.loads(out.read_text())
    assert saved["weights"].endswith("update_00000.pt")  # the run's start point, checkpoint 0
    assert set(saved["contexts"]) == {"oracle", "empty"}
    assert set(saved["contexts"]["oracle"]) >= {
        "expert_delta_mean",
        "expert_delta_se",
        "sampled_delta_mean",
        "sampled_delta_se",
        "prefers_expert_share",
        "n",
    }
    assert "expert Δ" in capsys.readouterr().out
    assert main(["probe", "tiny", "--contexts", "nonsense"]) == 1


def _named_and_wordings(tok, skilled) -> tuple[int, set]:
    """Checks every skilled demonstration's invariants; returns how many of them a rule names, and the wordings."""
    import re

    named, wordings = 0, set()
    for p, r, (start, end), _ in skilled:
        assert r == tok.encode(tok.decode(r[:-1]), add_special_tokens=False) + [tok.eos_token_id]  # as one text
        text = tok.decode(p)
        assert "Episode-Level Skill" in text
        rules = re.findall(r"when '([^']*)', take '(\w+)'", text)
        assert rules and len(dict(rules)) == len(rules)  # one move per situation
        wordings.add("workflow" if ", not '" not in text else "avoidance")
        now = situation(text.split("your current observation is:")[1].split("Your admissible")[0]).rstrip(".")
        action = re.search(r"<action>(\w+)</action>", tok.decode(r)).group(1)
        assert tok.decode(r[start:end]) == action
        if now in dict(rules):
            assert dict(rules)[now] == action
            named += 1
    return named, wordings


def test_skill_demonstrations_follow_the_skill_in_their_prompt(comps):
    """Every skilled demonstration's action is what the skill block's rule for its situation names, wherever a
    rule names it, in the workflow and in the avoidance wording, also when the skill was written for another room;
    rules never contradict each other; the plain demonstrations do not change when the shares are 0."""
    tok = comps.tokenizer
    plain = demonstrations(comps, 4, seed=7)
    assert all("Episode-Level Skill" not in tok.decode(d.prompt) for d in plain)
    assert demonstrations(comps, 4, seed=7, skill_share=0.0) == plain
    own = demonstrations(comps, 12, seed=7, skill_share=1.0)
    assert demonstrations(comps, 12, seed=7, skill_share=1.0, foreign_share=0.0) == own
    named, wordings = _named_and_wordings(tok, own)
    assert wordings == {"workflow", "avoidance"} and named >= len(own) // 2
    foreign = demonstrations(comps, 12, seed=7, skill_share=1.0, foreign_share=1.0)
    named_foreign, _ = _named_and_wordings(tok, foreign)
    assert named_foreign / len(foreign) < named / len(own)  # another room's rules name fewer of the states met


def test_a_skill_walk_moves_like_a_plain_demonstration_where_no_rule_binds(comps):
    """Off-rule moves are the expert's at `expert_share` where a situation is first met (so a skill about other
    situations keeps the plain prompt's preference for the expert move; a situation met again repeats its move);
    a situation some rule binds keeps the rule's move."""
    import random

    from seed.train.warmup import _random_walk

    def walk(task_seed, policy, expert_share):
        env = comps.env_factory("train")()
        states, moves, _ = _random_walk(env, comps.cfg, random.Random(0), task_seed, policy, expert_share)
        replay = comps.env_factory("train")()
        replay.reset(task_seed)
        experts = []
        for move in moves:
            experts.append((replay.expert_plan() or [None])[0])  # none once a random move deadlocks
            replay.step(move)
        first = {situation(st.observation): i for i, st in reversed(list(enumerate(states)))}.values()
        return states, [moves[i] for i in sorted(first)], [experts[i] for i in sorted(first)]

    seeds = range(10_000_000, 10_000_012)
    for task_seed in seeds:
        _, moves, experts = walk(task_seed, {}, 1.0)
        assert moves == experts
    off_expert = sum(m != e for s in seeds for m, e in zip(*walk(s, {}, 0.0)[1:]))
    assert off_expert > 0  # at share 0 the moves are random
    states, _, _ = walk(seeds[0], {}, 1.0)
    bound = {situation(states[0].observation): "left"}
    _, moves, _ = walk(seeds[0], bound, 1.0)
    assert moves[0] == "left"
