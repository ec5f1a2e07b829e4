"""ALFWorld on the official engine (TextWorld PDDL + ALFWorld's domain, grammar and planner expert).

Games come from the project's generator, or from the official data when ALFWORLD_DATA points to it
(`json_2.1.1/{train,valid_seen,valid_unseen}/<task>/<trial>/{game.tw-pddl,traj_data.json}`).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import sys
from pathlib import Path

from seed.envs.alfworld.generator import TASK_TYPES, game_json, generate_problem
from seed.envs.base import Obs, register
from seed.paths import cache_dir

_HIDDEN_COMMANDS = ("help",)


def _engine(infos=None):
    """One engine instance: PDDL env + AlfredDemangler + planner expert (expert_type passed by name)."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredExpertType
    from textworld.envs.pddl import PddlEnv

    infos = infos or textworld.EnvInfos(admissible_commands=True, won=True, extras=["expert_plan"])
    env = PddlEnv(infos)
    env = AlfredDemangler(env)
    return AlfredExpert(env, expert_type=AlfredExpertType.PLANNER)


@contextlib.contextmanager
def _argv_kept():
    """The planner expert runs fast-downward's translator in process, which overwrites `sys.argv`
    (['translate.py', 'domain', 'task']); the host program's command line must survive every reset and step."""
    original, saved = sys.argv, list(sys.argv)
    try:
        yield
    finally:
        original[:] = saved
        sys.argv = original


def _data_files() -> tuple[str, str]:
    import alfworld

    root = Path(alfworld.__file__).parent / "data"
    return (root / "alfred.pddl").read_text(), (root / "alfred.twl2").read_text()


def _task_type_of(game_file: str) -> str:
    traj = Path(game_file).with_name("traj_data.json")
    if traj.exists():
        return json.loads(traj.read_text()).get("task_type", "")
    return next((t for t in TASK_TYPES if t in game_file), "")


@register(
    "alfworld",
    "ALFWorld text engine; six task types over generated rooms (or official data via ALFWORLD_DATA)",
    choices={"task_types": TASK_TYPES},
)
class AlfworldEnv:
    name = "alfworld"
    intro = "You are an expert agent operating in the ALFRED Embodied Environment."

    def __init__(
        self,
        split: str = "train",
        task_types: list[str] | None = None,
        num_receptacles: int = 6,
        num_distractors: int = 4,
        data_dir: str | None = None,
    ):
        bad = [t for t in task_types or [] if t not in TASK_TYPES]
        if bad:
            raise ValueError(f"unknown task types {bad}; allowed: {', '.join(TASK_TYPES)}")
        self.split, self.task_types = split, list(task_types or TASK_TYPES)
        self.num_receptacles, self.num_distractors = num_receptacles, num_distractors
        self.data_dir = data_dir or os.environ.get("ALFWORLD_DATA")
        self._official = self._official_games() if self.data_dir else []
        self._domain, self._grammar = _data_files()
        self._env = _engine()
        self._state = None
        self.task_type = ""
        self.problem = None

    def _official_games(self) -> list[str]:
        files = sorted(glob.glob(os.path.join(self.data_dir, "json_2.1.1", self.split, "*", "*", "game.tw-pddl")))
        return [f for f in files if _task_type_of(f) in self.task_types]

    def _load(self, seed: int) -> None:
        if self._official:
            game = self._official[seed % len(self._official)]
            self.task_type = _task_type_of(game)
            self._env.load(game)
            return
        task_type = self.task_types[seed % len(self.task_types)]
        self.problem = generate_problem(self.split, seed, task_type, self.num_receptacles, self.num_distractors)
        self.task_type = task_type
        self._env.load(str(self._write_game(seed)))

    def _write_game(self, seed: int) -> Path:
        """Write game.tw-pddl + traj_data.json once (the expert reads traj_data.json beside the game file)."""
        assert self.problem is not None
        doc = game_json(self.problem, self._domain, self._grammar)
        key = hashlib.sha256(doc.encode()).hexdigest()[:16]
        folder = cache_dir() / "alfworld-games" / self.split / self.task_type / f"{seed}-{key}"
        game = folder / "game.tw-pddl"
        if not game.exists():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "traj_data.json").write_text(json.dumps(self.problem.traj_data()))
            tmp = folder / f".game.{os.getpid()}.tmp"
            tmp.write_text(doc)
            os.replace(tmp, game)
        return game

    def _obs(self, text: str) -> Obs:
        st = self._state
        admissible = [c for c in st["admissible_commands"] if c not in _HIDDEN_COMMANDS]
        return Obs(text=text, task=self._task, admissible=admissible, won=bool(st["won"]), task_type=self.task_type)

    def reset(self, seed: int) -> Obs:
        with _argv_kept():  # loading a game and resetting it both run the planner
            self._load(seed)
            self._state = self._env.reset()
        intro = self._state["feedback"]
        body, _, task = intro.partition("Your task is to: ")
        self._task = task.strip().rstrip(".")
        text = body.replace("-= Welcome to TextWorld, ALFRED! =-", "").strip()
        return self._obs(text)

    def step(self, action: str) -> tuple[Obs, float, bool, dict]:
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        admissible = [c for c in self._state["admissible_commands"] if c not in _HIDDEN_COMMANDS]
        if action not in admissible:
            obs = self._obs("Nothing happens.")
            return obs, 0.0, False, {"valid": False, "won": obs.won}
        with _argv_kept():
            self._state, _, done = self._env.step(action)
        obs = self._obs(self._state["feedback"].strip())
        return obs, float(obs.won), bool(obs.won), {"valid": True, "won": obs.won}

    def expert_plan(self) -> list[str]:
        if self._state is None:
            raise RuntimeError("call reset() before expert_plan()")
        return list(self._state.get("extra.expert_plan") or [])

    def close(self) -> None:
        self._state = None
