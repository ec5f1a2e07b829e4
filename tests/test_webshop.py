"""WebShop's shim on a stand-in of its text environment (tests/webshop_standin.py), in process and served."""

import functools
import json
import sys
from pathlib import Path

import pytest

from seed.agent import render
from seed.config import load_config
from seed.envs import make
from seed.skills.teachers import OracleTeacher
from seed.types import Episode, StepSample, StepState

HERE = Path(__file__).resolve().parent
STANDIN = {"backend": "webshop_standin:StandinTextEnv"}
sys.path.insert(0, str(HERE))


def _episode(env, seed: int, actions: list[str]) -> Episode:
    obs, steps, history = env.reset(seed), [], []
    for i, action in enumerate(actions):
        state = StepState.after("webshop", obs, history, 2, i)
        obs, _, done, info = env.step(action)
        steps.append(StepSample(state, [1], [2], [0.0], f"<action>{action}</action>", action, info["valid"], 0.0))
        history.append((state.observation, action))
        if done:
            break
    return Episode(f"w{seed}", 0, seed, state.task, "webshop", steps=steps, won=obs.won)


@pytest.mark.parametrize("split", ["train", "valid_seen", "valid_unseen"])
def test_the_expert_buys_the_goal_on_every_panel_task(split):
    env = make("webshop", split, **STANDIN)
    for seed in range(24):
        env.reset(seed)
        plan = env.expert_plan()
        assert plan[0].startswith("search[") and plan[-1] == "click[buy now]"
        for action in plan:
            obs, reward, done, info = env.step(action)
            assert info["valid"]
        assert done and obs.won and info["score"] == 1.0


def test_the_page_flow_admissible_actions_and_invalid_ones():
    env = make("webshop", "train", **STANDIN)
    obs = env.reset(7)
    assert obs.admissible == ["search[<your query>]"] and obs.task.startswith("i need a")
    assert obs.task not in obs.text  # the instruction is the task, not part of the page
    for bad in ("click[b0001]", "buy", "search[]"):
        obs2, _, done, info = env.step(bad)
        assert not info["valid"] and not done and obs2.text == obs.text
    obs, _, _, _ = env.step("search[rain jacket]")
    assert "click[back to search]" in obs.admissible and not any(a.startswith("search") for a in obs.admissible)
    wrong = next(a for a in obs.admissible if a.startswith("click[b0") and a != f"click[{env.goal()['asin']}]")
    env.step(wrong)
    _, reward, done, info = env.step("click[buy now]")
    assert done and not info["won"] and reward == pytest.approx(0.1)  # the wrong product scores low


def test_the_oracle_labels_a_webshop_episode_and_the_prompt_opens_with_its_intro(tokenizer):
    env = make("webshop", "train", **STANDIN)
    env.reset(4)
    won = _episode(env, 4, env.expert_plan())
    assert won.won
    oracle = OracleTeacher(functools.partial(make, "webshop", split="train", **STANDIN))
    assert json.loads(oracle.label(won))["episode_skill"].startswith("What works:")
    lost = _episode(env, 4, ["search[tote bag]", "click[back to search]", "click[buy now]"])
    assert json.loads(oracle.label(lost))["episode_skill"].startswith("Warning:")
    text = tokenizer.decode(render(won.steps[1].state, tokenizer))
    assert "operating in the WebShop e-commerce platform. Your task is to: i need a" in text


def test_webshop_served_over_the_remote_protocol_plays_as_in_process():
    from test_remote_envs import serve

    proc, url = serve("seed.envs.webshop:WebShopEnv", sys.executable, str(HERE), "--kwargs", json.dumps(STANDIN))
    try:
        remote, local = make("remote", "valid_seen", url=url), make("webshop", "valid_seen", **STANDIN)
        for seed in range(3):
            local.reset(seed)
            plan = local.expert_plan()
            a, b = remote.reset(seed), local.reset(seed)
            assert (a.text, a.task, a.admissible) == (b.text, b.task, b.admissible)
            assert a.intro == make("webshop", "train", **STANDIN).intro
            for action in ["click[nothing]", *plan]:
                ra, la = remote.step(action), local.step(action)
                assert (ra[0].text, ra[0].admissible, ra[1:]) == (la[0].text, la[0].admissible, la[1:])
    finally:
        proc.kill()
        proc.wait()


def test_the_webshop_recipe_loads_with_the_papers_settings(tmp_path):
    cfg = load_config("webshop_seed_qwen2.5-3b", [f"run_dir={tmp_path}"])
    assert cfg.env.name == "remote" and cfg.env.max_steps == 15 and cfg.env.history_length == 2
    assert (cfg.rollout.tasks_per_update, cfg.rollout.group_size, cfg.algo.mini_batch_size) == (16, 8, 64)
    assert cfg.algo.norm == "mean" and cfg.rollout.success_reward == 10.0
