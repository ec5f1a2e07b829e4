"""Ray start-up in one place: an existing cluster (`address`) or a local one sized to this machine."""
from __future__ import annotations

import math
import os


def init_ray(address: str | None = None):
    """Import and initialise Ray once per process; returns the module. Ray is an optional dependency."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError("env.workers / generation.workers > 0 need Ray: pip install 'ray[default]'") from exc
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    return ray


def cpus_per_worker(workers: int) -> float:
    """CPUs to reserve per actor so that `workers` more actors fit in what the cluster has left (a local cluster
    has os.cpu_count(); env and generation actors share it): at most 1, fractional when short, 0 when none is left.
    Reserving spreads actors over a multi-node cluster; it never leaves one pending."""
    import ray

    free = ray.available_resources().get("CPU", 0.0)
    return math.floor(min(1.0, free / max(1, workers)) * 1e4) / 1e4  # Ray counts resources in 1e-4 units
