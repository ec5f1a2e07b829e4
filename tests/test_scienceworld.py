"""ScienceWorld (the scienceworld package's JAR on Java 17): splits, the gold-path expert, invalid actions."""

import functools
import json
import shutil

import pytest

pytest.importorskip("scienceworld")
if shutil.which("java") is None:
    pytest.skip("ScienceWorld's simulator needs Java 17 (openjdk-17-jre-headless)", allow_module_level=True)

from seed.envs import make  # noqa: E402
from seed.envs.scienceworld import task_variations  # noqa: E402
from seed.skills.teachers import OracleTeacher  # noqa: E402
from seed.types import Episode, StepSample, StepState  # noqa: E402

QUICK = ["find-living-thing", "melt"]


def _play(env, seed: int) -> bool:
    env.reset(seed)
    plan = env.expert_plan()
    assert plan
    for action in plan:  # a gold step may be one the parser answers "No known action" (an `examine` of a
        obs, _, done, info = env.step(action)  # substance the step before transformed); the path still wins
    return done and obs.won


def test_splits_are_scienceworlds_variation_splits():
    env = make("scienceworld", "train", tasks=QUICK)
    splits = {s: task_variations(env.engine, s, tuple(QUICK), "easy") for s in ("train", "valid_seen", "valid_unseen")}
    env.close()
    assert all(splits.values())
    train = set(splits["train"])
    assert not train & set(splits["valid_unseen"]) and not train & set(splits["valid_seen"])
    assert {t for t, _ in splits["valid_unseen"]} == set(QUICK)  # unseen variations of the same tasks


@pytest.mark.parametrize("split", ["train", "valid_seen", "valid_unseen"])
def test_the_gold_path_wins_a_quick_panel(split):
    env = make("scienceworld", split, tasks=QUICK)
    seeds = [0, len(env.pairs) - 1]  # the first variation of the first task, the last of the last
    assert all(_play(env, seed) for seed in seeds)
    env.close()


def test_unparsed_actions_are_invalid_and_the_oracle_labels_an_episode():
    env = make("scienceworld", "train", tasks=["find-living-thing"])
    obs = env.reset(1)
    assert obs.admissible == [] and "focus on OBJ" in obs.text and obs.task.startswith("Your task is to")
    _, reward, done, info = env.step("fly to the moon")
    assert not info["valid"] and reward == 0.0 and not done
    obs, steps, history = env.reset(1), [], []
    gold = env.expert_plan()  # generated at each reset (the simulator may pick another route)
    for i, action in enumerate(gold[:3]):
        state = StepState.after("scienceworld", obs, history, 2, i)
        obs, _, _, info = env.step(action)
        steps.append(StepSample(state, [1], [2], [0.0], f"<action>{action}</action>", action, True, 0.0))
        history.append((state.observation, action))
    assert env.expert_plan() == gold[3:]
    episode = Episode("sw", 0, 1, steps[0].state.task, "find-living-thing", steps=steps, won=False)
    oracle = OracleTeacher(functools.partial(make, "scienceworld", split="train", tasks=["find-living-thing"]))
    assert json.loads(oracle.label(episode))["episode_skill"].startswith("Warning:")  # ran out of steps
    env.close()


@pytest.mark.slow
def test_the_gold_path_wins_every_task_of_every_split():
    for split in ("train", "valid_seen", "valid_unseen"):
        env = make("scienceworld", split)
        firsts = {}
        for seed, (task, _) in enumerate(env.pairs):
            firsts.setdefault(task, seed)
        assert len(firsts) == 30 and all(_play(env, seed) for seed in firsts.values())
        env.close()
