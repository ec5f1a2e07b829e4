"""Checkpoints that are atomic, verified, and never execute code on load.

A checkpoint holds only tensors and plain data (model, optimizer, RNG states as lists and tensors, update index,
config as a plain dict, the skill stream as text) plus a SHA-256 over all of it. It is written to a temporary file
and renamed, read with `torch.load(weights_only=True)` (which refuses any pickled object that is not plain data),
and its checksum is recomputed on load: a truncated, corrupted or planted file is refused, and the run falls back to
the newest checkpoint that verifies.

Data-parallel runs write `update_N.dcp/` folders instead (each rank its shard, seed.dist.fsdp.save_sharded); every
reader here takes both, so any checkpoint resumes in one process.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch

from seed.errors import CheckpointError, NonFiniteError
from seed.storage import load_verified, save_verified

log = logging.getLogger(__name__)

_NAME = re.compile(r"^update_(\d+)\.(pt|dcp)$")
_STALE_TMP = re.compile(r"^\..+\.\d+\.tmp$|^update_\d+\.dcp\.tmp$")  # save_verified's and save_sharded's


def rng_state() -> dict:
    """Python, NumPy and torch RNG states as plain lists and tensors (loadable with weights_only=True)."""
    version, internal, gauss = random.getstate()
    np_state = np.random.get_state(legacy=False)
    return {
        "python": [version, list(internal), gauss],
        "numpy": {
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": "MT19937",
            "state": {"key": n["key"].numpy().astype(np.uint32), "pos": n["pos"]},
            "has_gauss": n["has_gauss"],
            "gauss": n["gauss"],
        }
    )
    torch.set_rng_state(state["torch"])


def non_finite_tensors(state: dict[str, torch.Tensor]) -> list[str]:
    """Names of floating-point tensors holding NaN or inf."""
    return [
        k
        for k, v in state.items()
        if isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())
    ]


def check_finite_weights(state: dict[str, torch.Tensor], what: str) -> None:
    bad = non_finite_tensors(state)
    if bad:
        raise NonFiniteError(
            f"{what}: {len(bad)} weight tensors hold NaN/inf (first: {bad[0]}); not saved. "
            f"Lower algo.lr or algo.grad_clip and resume from the last checkpoint"
        )


def save_checkpoint(run_dir: Path, update: int, payload: dict, keep: int = 2) -> Path:
    """`checkpoints/update_N.pt`, after checking that every weight is finite; older ones beyond `keep` pruned."""
    check_finite_weights(payload["model"], f"checkpoint of update {update}")
    folder = Path(run_dir) / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    path = save_verified(payload, folder / f"update_{update:05d}.pt")
    prune_checkpoints(run_dir, keep)
    return path


def prune_checkpoints(run_dir: Path, keep: int) -> None:
    for old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old) if old.is_dir() else old.unlink(missing_ok=True)


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Delete the temp files of writes that were killed midway (`.update_N.pt.<pid>.tmp`, `update_N.dcp.tmp/`)."""
    found = []
    for folder in (Path(run_dir), Path(run_dir) / "checkpoints"):
        if folder.is_dir():
            found += [p for p in folder.iterdir() if _STALE_TMP.match(p.name)]
    for p in found:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    if found:
        log.warning("removed %d temporary files of interrupted writes: %s", len(found), [p.name for p in found])
    return found


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
    """A checkpoint as one plain dict (model, optimizer with index keys, rng, generator, update, ...), verified."""
    if Path(path).is_dir():
        from seed.dist.fsdp import load_sharded_into_one_process

        return load_sharded_into_one_process(path)
    return load_verified(path)


def load_latest_checkpoint(run_dir: Path, set_aside: bool = True) -> tuple[Path | None, dict | None]:
    """The newest checkpoint that verifies, and its state. A damaged newer one is renamed `*.damaged` (kept, never
    read again; only where `set_aside`, i.e. on one rank) and the run says which one it falls back to.
    (None, None) when the run has no checkpoint."""
    found = list_checkpoints(run_dir)
    damaged: list[tuple[Path, str]] = []
    for path in reversed(found):
        try:
            state = load_checkpoint(path)
        except CheckpointError as exc:
            damaged.append((path, str(exc)))
            continue
        for bad, why in damaged if set_aside else []:  # kept for inspection, never read again
            os.replace(bad, bad.with_name(bad.name + ".damaged"))
            log.warning("%s; moved aside to %s.damaged", why, bad.name)
        if damaged and set_aside:
            print(f"seed: {len(damaged)} damaged checkpoint(s) set aside (*.damaged); resuming from {path.name}")
        return path, state
    if damaged:
        raise CheckpointError(
            f"no checkpoint under {Path(run_dir) / 'checkpoints'} verifies "
            f"({'; '.join(why for _, why in damaged)}); start a new run_dir or restore a checkpoint"
        )
    return None, None
