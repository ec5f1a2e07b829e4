"""Metrics: one JSON object per line in metrics.jsonl (with an `update` key) and the same scalars in TensorBoard."""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import math
import os
from pathlib import Path

from seed.storage import read_jsonl


def rss_mb() -> float:
    """This process's resident memory now (Linux /proc; 0.0 where unavailable): a leak shows as a slope."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def trim_heap() -> bool:
    """Hand the C heap's free pages back to the OS (glibc `malloc_trim`); False where the C library has none.

    Every update allocates tensors of new shapes (batch and sequence lengths vary); glibc keeps the freed blocks
    resident inside its heaps, so without a trim RSS creeps up from update to update although nothing in them is
    alive. A trim after each update costs milliseconds."""
    try:
        malloc_trim = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError, TypeError):  # no C library found, or not glibc (musl, macOS)
        return False
    malloc_trim(0)
    return True


class MetricsLogger:
    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(Path(run_dir) / "tensorboard"))
            except ImportError:  # tensorboard is optional
                self._tb = None

    def log(self, update: int, values: dict) -> None:
        row = {"update": update, **values}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for k, v in values.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    self._tb.add_scalar(k, v, update)
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_metrics(run_dir: Path) -> list[dict]:
    """metrics.jsonl's rows; a torn trailing line (a kill mid-write) is skipped."""
    return read_jsonl(Path(run_dir) / "metrics.jsonl")
