"""Ray start-up in one place: an existing cluster (`address`) or a local one sized to this machine."""

from __future__ import annotations

import math
import os

_started_local_cluster = False


def init_ray(address: str | None = None):
    """Import and initialise Ray once per process; returns the module. Ray is an optional dependency."""
    global _started_local_cluster
    try:
        import ray
    except ImportError as exc:
        raise ImportError("env.workers / generation.workers > 0 need Ray: pip install 'ray[default]'") from exc
    if not ray.is_initialized():
        _started_local_cluster = not address
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    return ray


def cpus_per_worker(workers: int) -> float:
    """CPUs to reserve per actor. On a local cluster this process started: none — every actor runs on this machine
    anyway, and a reservation can only leave an actor pending (Ray's free-resource view lags just-created actors).
    On an external cluster: what it has left divided over `workers` actors, at most 1 each, so actors spread over
    nodes; fractional when short, 0 when nothing is left."""
    if _started_local_cluster:
        return 0.0
    import ray

    free = ray.available_resources().get("CPU", 0.0)
    return math.floor(min(1.0, free / max(1, workers)) * 1e4) / 1e4  # Ray counts resources in 1e-4 units
