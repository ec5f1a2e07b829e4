"""Scale-out pieces: env workers (Ray actors), generation workers, FSDP2 data-parallel training.

Everything here is optional: with the defaults (`env.workers: 0`, `generation.workers: 0`) a run is one process
and needs neither Ray nor torch.distributed.
"""

from seed.dist.env_pool import EnvFault, LocalEnvPool, RayEnvPool, make_env_pool

__all__ = ["EnvFault", "LocalEnvPool", "RayEnvPool", "make_env_pool"]
