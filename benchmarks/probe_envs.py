"""Imported by probes.py into a probe's subprocess: registers tests/hostile.py's FaultySokoban under the name
"sokoban", so the same command line (`env.kwargs.mode=...`) probes any version of seed (older configs knew only
the built-in env names)."""

import seed.envs.sokoban  # noqa: F401  (registers the real one first, so the entry below replaces it)
from hostile import FaultySokoban
from seed.envs.base import register

register("sokoban", "Sokoban whose calls fail on purpose (probes only)")(FaultySokoban)
