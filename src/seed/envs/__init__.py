"""Environments: `seed.envs.make(name, split=...)`.

An env registers itself with `@register(name, description)` when its module is imported. The package's own are
listed in `builtins.py`; other packages add theirs under the `seed.envs` entry-point group (the module that
registers them).
"""

from seed.envs.base import ENV_SPLITS, Env, Obs, available, intro, make, register
from seed.envs.builtins import BUILTIN_MODULES

__all__ = ["BUILTIN_MODULES", "ENV_SPLITS", "Env", "Obs", "available", "intro", "make", "register"]
