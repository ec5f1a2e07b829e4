"""Atomic checkpoints: model, optimizer, RNG, update index and config in one file, written via temp + rename.

Data-parallel runs write `update_N.dcp/` folders instead (each rank its shard, seed.dist.fsdp.save_sharded); every
reader here takes both, so any checkpoint resumes in one process.
"""
from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch

_NAME = re.compile(r"^update_(\d+)\.(pt|dcp)$")


def rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(run_dir: Path, update: int, payload: dict, keep: int = 2) -> Path:
    folder = Path(run_dir) / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"update_{update:05d}.pt"
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    torch.save(payload, tmp)
    os.replace(tmp, path)  # a reader sees the old file or the whole new one, never half of one
    prune_checkpoints(run_dir, keep)
    return path


def prune_checkpoints(run_dir: Path, keep: int) -> None:
    for old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old) if old.is_dir() else old.unlink(missing_ok=True)


def list_checkpoints(run_dir: Path) -> list[Path]:
    folder = Path(run_dir) / "checkpoints"
    if not folder.exists():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def load_checkpoint(path: Path) -> dict:
    """A checkpoint as one plain dict (model, optimizer with index keys, rng, generator, update, ...)."""
    if Path(path).is_dir():
        from seed.dist.fsdp import load_sharded_into_one_process

        return load_sharded_into_one_process(path)
    return torch.load(path, map_location="cpu", weights_only=False)
