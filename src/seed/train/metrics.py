"""Metrics: one JSON object per line in metrics.jsonl (with an `update` key) and the same scalars in TensorBoard."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from seed.storage import read_jsonl


def rss_mb() -> float:
    """This process's resident memory now (Linux /proc; 0.0 where unavailable): a leak shows as a slope."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


_process_peak_mb = 0.0
phase_peaks_mb: dict[str, float] = {}  # the highest peak of each named phase so far in this process
phase_seconds: dict[str, float] = {}  # the seconds spent in each named phase so far in this process


def _high_water_mb() -> float:
    """VmHWM: the process's peak resident memory since start or since the last reset (Linux; 0.0 elsewhere)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def process_peak_rss_mb() -> float:
    """The process's peak resident memory, phase resets included (getrusage's maxrss forgets what they reset)."""
    return max(_process_peak_mb, _high_water_mb())


@contextmanager
def phase_peak(stats: dict, name: str) -> Iterator[None]:
    """Record the peak RSS of the enclosed phase as `stats["memory/peak_<name>_mb"]`: the high-water mark is reset
    on entry (/proc/self/clear_refs) and read on exit. Where it cannot be reset, nothing is recorded. The phase's
    seconds add up in `phase_seconds`."""
    global _process_peak_mb
    _process_peak_mb = process_peak_rss_mb()
    trim_heap()  # what earlier phases freed goes back to the OS, so it is not counted as this phase's peak
    start = time.perf_counter()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        reset = True
    except OSError:
        reset = False
    try:
        yield
    finally:
        phase_seconds[name] = phase_seconds.get(name, 0.0) + time.perf_counter() - start
        peak = _high_water_mb()
        _process_peak_mb = max(_process_peak_mb, peak)
        if reset and peak:
            stats[f"memory/peak_{name}_mb"] = peak
            phase_peaks_mb[name] = max(phase_peaks_mb.get(name, 0.0), peak)


def trim_heap() -> bool:
    """Hand the C heap's free pages back to the OS; False where the allocator offers no way to.

    Every update allocates tensors of new shapes (batch and sequence lengths vary); the allocator keeps freed blocks
    resident, so without a release RSS creeps up from update to update although nothing in them is alive. A release
    after each update costs milliseconds. Under the tcmalloc the `seed` command preloads, glibc's `malloc_trim`
    would find an empty heap: tcmalloc's own release runs instead."""
    release = _heap_release()
    if release is None:
        return False
    release()
    return True


@functools.cache
def _heap_release() -> Callable[[], object] | None:
    try:
        tcmalloc_release = getattr(ctypes.CDLL(None), "MallocExtension_ReleaseFreeMemory", None)
    except (OSError, TypeError):  # no handle on the process's own symbols (Windows)
        tcmalloc_release = None
    if tcmalloc_release is not None:
        return tcmalloc_release
    try:
        malloc_trim = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError, TypeError):  # no C library found, or not glibc (musl, macOS)
        return None
    return lambda: malloc_trim(0)


def finite_numbers(values: dict) -> dict[str, float]:
    """The finite numbers of a metrics row: what charts can draw (strings and NaN stay in metrics.jsonl)."""
    return {
        k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


class MetricsLogger:
    """metrics.jsonl (the record `seed report` reads), and the same rows to TensorBoard and W&B where on."""

    def __init__(self, run_dir: Path, tensorboard: bool = True, wandb=None):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._wandb = wandb  # a seed.train.wandb_sink.WandbSink, or None
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
            for k, v in finite_numbers(values).items():
                self._tb.add_scalar(k, v, update)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(update, values)

    def log_episodes(self, update: int, episodes: list) -> None:
        """A sample of the update's episodes with their skills, where a sink shows tables (W&B)."""
        if self._wandb is not None:
            self._wandb.log_episodes(update, episodes)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_metrics(run_dir: Path) -> list[dict]:
    """metrics.jsonl's rows; a torn trailing line (a kill mid-write) is skipped."""
    return read_jsonl(Path(run_dir) / "metrics.jsonl")
