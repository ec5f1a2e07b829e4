"""Ray start-up in one place: an existing cluster (`address`) or a local one sized to this machine."""
from __future__ import annotations

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
    """Fractional CPUs so that `workers` actors always fit on the cluster (a local one has os.cpu_count())."""
    import ray

    total = ray.cluster_resources().get("CPU", os.cpu_count() or 1)
    return min(1.0, total / max(1, workers))
