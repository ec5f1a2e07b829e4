"""ScienceWorld: the 30 elementary-science tasks of the `scienceworld` package (its JAR ships in the wheel; Java 17).

A task seed picks one (task, variation) of the split: ScienceWorld's own train variations are `train`, its dev
variations `valid_seen`, its test variations `valid_unseen` (held-out variations of the same 30 tasks). `tasks`
narrows the task list. The reward is the change of ScienceWorld's score (0–100, scaled to 0–1); an episode is won
when the task completes with the full score. The expert is the simulator's gold path (`gold_paths`), generated at
each reset: from a state off that path it continues with the gold steps not yet taken.

Steps go to the simulator's server directly: the wrapper's `step` also lists every valid action (thousands,
~150 ms) to return them, which a policy prompt cannot show anyway. An action the simulator does not parse ("No
known action matches that input.") is flagged invalid. The prompt names the action templates instead.
"""

from __future__ import annotations

from seed.envs.base import Obs, register

SPLIT_VARIATIONS = {
    "train": "get_variations_train",
    "valid_seen": "get_variations_dev",
    "valid_unseen": "get_variations_test",
}
NOT_PARSED = "No known action matches that input."
TEMPLATES = (
    "open OBJ, close OBJ, activate OBJ, deactivate OBJ, go to LOC, teleport to LOC, look around, look at OBJ, "
    "look in OBJ, pick up OBJ, put down OBJ, move OBJ to OBJ, pour OBJ in OBJ, mix OBJ, dunk OBJ in OBJ, "
    "use OBJ on OBJ, read OBJ, eat OBJ, flush OBJ, focus on OBJ, connect OBJ to OBJ, wait, wait1, inventory"
)


def _engine(step_limit: int):
    try:
        from scienceworld import ScienceWorldEnv as Engine
    except ImportError as exc:
        raise ImportError("env 'scienceworld' needs the scienceworld package and Java 17") from exc
    return Engine("", envStepLimit=step_limit)


_VARIATIONS: dict[tuple, tuple[tuple[str, int], ...]] = {}  # listed once per process: listing loads every task


def task_variations(
    engine, split: str, tasks: tuple[str, ...] | None, simplifications: str
) -> tuple[tuple[str, int], ...]:
    """Every (task, variation) of the split, in task order, listed with `engine` (the env's own simulator)."""
    key = (split, tasks, simplifications)
    if key not in _VARIATIONS:
        pairs = []
        for task in tasks or engine.get_task_names():
            engine.load(task, 0, simplifications)
            pairs += [(task, int(v)) for v in getattr(engine, SPLIT_VARIATIONS[split])()]
        _VARIATIONS[key] = tuple(pairs)
    return _VARIATIONS[key]


@register("scienceworld", "ScienceWorld's 30 science tasks (the scienceworld package, Java 17); gold paths as expert")
class ScienceWorldEnv:
    name = "scienceworld"
    intro = "You are an agent doing an elementary science experiment in a text world."

    def __init__(
        self,
        split: str = "train",
        tasks: list[str] | None = None,
        simplifications: str = "easy",
        step_limit: int = 100,
        gold_paths: bool = True,
    ):
        self.split, self.simplifications, self.gold_paths = split, simplifications, gold_paths
        self.engine = _engine(step_limit)
        self.pairs = task_variations(self.engine, split, tuple(tasks) if tasks else None, simplifications)
        self.task, self.gold, self.taken, self.score, self.done = "", [], 0, 0.0, False

    def _obs(self, text: str) -> Obs:
        shown = f"{text.strip()}\nActions take these forms: {TEMPLATES}."
        won = self.done and self.score >= 1.0
        return Obs(shown, self.task, [], won, self.engine.taskName)

    def reset(self, seed: int) -> Obs:
        task, variation = self.pairs[seed % len(self.pairs)]
        self.engine.load(task, variation, self.simplifications, generateGoldPath=self.gold_paths)
        text, _ = self.engine.reset()
        description = self.engine.taskdescription()
        self.task = description.replace("Task Description:", "").strip().splitlines()[0].strip()
        self.gold = list(self.engine.get_gold_action_sequence()) if self.engine.goldPathGenerated else []
        self.taken, self.score, self.done = 0, max(0.0, self.engine.server.getScore()), False
        return self._obs(text)

    def step(self, action: str) -> tuple[Obs, float, bool, dict]:
        server = self.engine.server
        text = server.step(action.strip())
        valid = NOT_PARSED not in text
        score = max(0.0, server.getScore())
        reward, self.score = score - self.score, score
        over = self.engine.get_num_moves() > self.engine.envStepLimit
        self.done = bool(server.getCompleted()) or server.getScore() < 0 or over
        if valid and self.taken < len(self.gold) and action.strip() == self.gold[self.taken]:
            self.taken += 1
        obs = self._obs(text)
        return obs, reward, self.done, {"valid": valid, "won": obs.won, "score": self.score}

    def expert_plan(self) -> list[str]:
        """The gold steps not yet taken ([] without a gold path, or once the episode ended)."""
        return [] if self.done else self.gold[self.taken :]

    def close(self) -> None:
        self.engine.close()
