"""Your own environment in 30 lines: a corridor whose exit is a few cells to the right.

Train on it from the repository root without touching seed (or register it under a name of your own through the
`seed.envs` entry-point group of your package):

    PYTHONPATH=. seed train tiny env.name=examples.custom_env:Corridor
"""

from seed.envs import Obs


class Corridor:
    """Walk to the exit of a corridor."""

    name, intro = "corridor", "You are an agent in a corridor."  # intro: the sentence every prompt opens with

    def __init__(self, split: str = "train", length: int = 4):
        self.split, self.length, self.at, self.goal = split, length, 0, length

    def _obs(self) -> Obs:  # text the policy reads, the task, the actions the env accepts, and whether it is won
        text = f"You are {self.goal - self.at} cells from the exit."
        return Obs(text, "reach the exit", ["left", "right"], won=self.at == self.goal, task_type="corridor")

    def reset(self, seed: int) -> Obs:  # the same (split, seed) must give the same task
        self.goal = self.length + seed % 3 + (7 if self.split == "valid_unseen" else 0)
        self.at = 0
        return self._obs()

    def step(self, action: str) -> tuple[Obs, float, bool, dict]:  # info["valid"]: was the action accepted?
        valid = action in ("left", "right")
        self.at = max(0, self.at + (action == "right") - (action == "left"))
        obs = self._obs()
        return obs, float(obs.won), obs.won, {"valid": valid, "won": obs.won}

    def expert_plan(self) -> list[str]:  # the oracle teacher and the expert metrics use it; [] if there is none
        return ["right"] * (self.goal - self.at)

    def close(self) -> None:
        pass
