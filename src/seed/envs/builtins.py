"""The envs this package ships: the modules whose import registers them (`seed.envs.base` imports each on first
use of the registry). Envs of other packages come through the `seed.envs` entry-point group instead."""

BUILTIN_MODULES = (
    "seed.envs.sokoban",
    "seed.envs.ezpoints",
    "seed.envs.search.env",
    "seed.envs.webshop",
    "seed.envs.scienceworld",
    "seed.envs.remote",
    "seed.envs.alfworld.env",
)
