"""Environments: `seed.envs.make(name, split=...)`."""
from seed.envs.base import ENV_SPLITS, Env, Obs, available, make, register

__all__ = ["ENV_SPLITS", "Env", "Obs", "available", "make", "register"]
