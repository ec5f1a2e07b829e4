"""Hostile parts shared by the robustness tests and benchmarks/probes.py: an env whose calls fail on purpose, and a
pickle that runs code when loaded. Only the env protocol is imported, so any version of seed can be probed."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

from seed.envs.sokoban import SokobanEnv

RELEASE = threading.Event()  # lets a deliberately hung env call return (tests set it when done)


class FaultySokoban(SokobanEnv):
    """Sokoban that fails as `mode` says: reset_raises, odd_reset_raises, step_none, step_hangs, expert_raises."""

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
            RELEASE.wait(3600)
        return super().step(action)

    def expert_plan(self):
        if self.mode == "expert_raises":
            raise RuntimeError("planner crashed")
        return super().expert_plan()


class Payload:
    """Unpickling this creates the file `marker`: the proof that loading ran code."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def plant(path: Path, marker: Path) -> None:
    """A pickle at `path` shaped like a checkpoint, whose loading would create `marker`."""
    Path(path).write_bytes(pickle.dumps({"model": Payload(marker), "update": 9}))
