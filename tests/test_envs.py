"""Real engines: the expert plan wins every task of a panel on every split; invalid actions are flagged."""

import sys

import pytest

from seed.envs import available, make
from seed.envs.alfworld.generator import TASK_TYPES, generate_problem, is_unseen_combo


def test_registry_lists_builtins_and_rejects_unknown():
    assert {"alfworld", "ezpoints", "remote", "scienceworld", "search_qa", "sokoban", "webshop"} <= set(available())
    with pytest.raises(ValueError, match="available: alfworld, ezpoints, remote, scienceworld, search_qa, sokoban"):
        make("nope")
    with pytest.raises(ValueError, match="allowed: train, valid_seen, valid_unseen"):
        make("sokoban", split="test")


def test_another_package_registers_an_env_through_its_entry_point(tmp_path, monkeypatch):
    from seed.envs import base, intro

    (tmp_path / "toy_env_plugin.py").write_text(
        "from seed.envs.sokoban import SokobanEnv\n"
        "from seed.envs import register\n"
        "@register('toy', 'a plugin env', choices={'mode': ['a', 'b']})\n"
        "class ToyEnv(SokobanEnv):\n"
        "    name = 'toy'\n"
        "    intro = 'You are a toy agent.'\n"
    )
    info = tmp_path / "toy_env_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-env-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[seed.envs]\ntoy = toy_env_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    available()  # the built-ins registered in the real registry first: the copy below is thrown away after
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    base._discover.cache_clear()
    try:
        assert available()["toy"] == "a plugin env"
        assert intro("toy") == "You are a toy agent."
        assert base.argument_choices("toy") == {"mode": ("a", "b")}
        assert make("toy", split="valid_seen").split == "valid_seen"
    finally:
        base._discover.cache_clear()


def test_an_env_without_an_intro_is_refused_at_registration():
    from seed.envs import base

    class Bare:
        name = "bare"

    with pytest.raises(TypeError, match="no `intro`"):
        base.register("bare", "no intro")(Bare)
    assert "bare" not in base._REGISTRY


def test_each_builtin_env_opens_its_prompts_with_its_own_intro():
    from seed.agent import render_text
    from seed.envs import intro
    from seed.types import StepState

    for name in ("alfworld", "sokoban"):
        text = render_text(StepState(name, "do it", "obs", ["a"]))
        assert text.startswith(f"{intro(name)} Your task is to: do it")
    assert intro("sokoban") != intro("alfworld")


@pytest.mark.parametrize("split", ["train", "valid_seen", "valid_unseen"])
def test_sokoban_expert_wins_panel(split):
    env = make("sokoban", split=split)
    for seed in range(20):
        obs = env.reset(seed)
        assert not obs.won
        for action in env.expert_plan():
            obs, reward, done, info = env.step(action)
            assert info["valid"]
        assert obs.won and done and reward == 1.0


def test_sokoban_is_reproducible_and_splits_differ():
    a, b = make("sokoban"), make("sokoban", split="valid_unseen")
    assert a.reset(3).text == make("sokoban").reset(3).text
    assert a.reset(3).text != b.reset(3).text


def test_sokoban_invalid_action_is_a_flagged_noop():
    env = make("sokoban")
    before = env.reset(0).text
    obs, reward, done, info = env.step("jump")
    assert info["valid"] is False and obs.text == before and reward == 0.0 and not done


@pytest.mark.parametrize("split", ["train", "valid_seen", "valid_unseen"])
def test_alfworld_expert_wins_every_task_type(split):
    env = make("alfworld", split=split)
    seen_types = set()
    for seed in range(len(TASK_TYPES)):
        obs = env.reset(seed)
        seen_types.add(obs.task_type)
        assert obs.admissible and obs.task
        for _ in range(30):
            obs, reward, done, info = env.step(env.expert_plan()[0])
            assert info["valid"]
            if done:
                break
        assert obs.won and reward == 1.0, (split, seed, obs.task_type)
    assert seen_types == set(TASK_TYPES)


def test_alfworld_invalid_action_is_a_flagged_noop():
    env = make("alfworld", split="train")
    env.reset(0)
    plan_before = env.expert_plan()
    obs, reward, done, info = env.step("fly to the moon")
    assert info["valid"] is False and obs.text == "Nothing happens." and not done
    assert env.expert_plan() == plan_before


def test_alfworld_leaves_the_host_programs_command_line_alone(monkeypatch):
    """The planner's translator rewrites sys.argv in process; benchmarks record their command from it."""
    argv = ["seed", "run", "alfworld_cpu"]
    monkeypatch.setattr(sys, "argv", argv)
    env = make("alfworld", split="train")
    obs = env.reset(3)
    env.step(env.expert_plan()[0])
    env.step(obs.admissible[-1])
    assert sys.argv is argv and argv == ["seed", "run", "alfworld_cpu"]


def test_alfworld_splits_are_deterministic_and_unseen_is_held_out():
    p1, p2 = generate_problem("train", 5), generate_problem("train", 5)
    assert p1.pddl == p2.pddl
    for i in range(30):
        tr, un = generate_problem("train", i), generate_problem("valid_unseen", i)
        assert not is_unseen_combo(tr.task_type, tr.obj, tr.recep, tr.room)
        assert is_unseen_combo(un.task_type, un.obj, un.recep, un.room)
    assert generate_problem("train", 0).pddl != generate_problem("valid_seen", 0).pddl


def test_alfworld_serves_official_layout_when_data_dir_is_given(tmp_path):
    """Games laid out like the official data (json_2.1.1/<split>/<task>/<trial>/) load through the same adapter."""
    import shutil

    source = make("alfworld", split="valid_seen")
    source.reset(0)
    game = source._write_game(0)
    trial = tmp_path / "json_2.1.1" / "valid_seen" / f"{source.task_type}-x" / "trial_1"
    trial.mkdir(parents=True)
    shutil.copy(game, trial / "game.tw-pddl")
    shutil.copy(game.with_name("traj_data.json"), trial / "traj_data.json")
    env = make("alfworld", split="valid_seen", data_dir=str(tmp_path))
    obs = env.reset(0)
    assert env.problem is None and obs.task_type == source.task_type
    for _ in range(30):
        obs, _, done, _ = env.step(env.expert_plan()[0])
        if done:
            break
    assert obs.won
