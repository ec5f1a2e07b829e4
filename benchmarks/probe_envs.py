"""Imported by probes.py into a probe's subprocess: registers, under the name "sokoban", a Sokoban whose calls fail
as `env.kwargs.mode` says, so the same command line probes any version of seed (older configs knew only the
built-in env names)."""
from __future__ import annotations

import time

import seed.envs.sokoban  # noqa: F401  (registers the real one first, so the entry below replaces it)
from seed.envs.base import register
from seed.envs.sokoban import SokobanEnv


@register("sokoban", "Sokoban whose calls fail on purpose (probes only)")
class FaultySokoban(SokobanEnv):
    def __init__(self, split: str = "train", mode: str = "", **kwargs):
        super().__init__(split=split, **kwargs)
        self.mode = mode

    def reset(self, seed):
        if self.mode == "reset_raises" or (self.mode == "odd_reset_raises" and seed % 2):
            raise RuntimeError("broken room")
        return super().reset(seed)

    def step(self, action):
        if self.mode == "step_none":
            return None
        if self.mode == "step_hangs":
            time.sleep(3600)
        return super().step(action)

    def expert_plan(self):
        if self.mode == "expert_raises":
            raise RuntimeError("planner crashed")
        return super().expert_plan()
