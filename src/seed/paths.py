"""Where seed keeps its user-level cache (converted model folders, generated game files)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$SEED_CACHE, else $XDG_CACHE_HOME/seed, else ~/.cache/seed."""
    root = os.environ.get("SEED_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"), "seed"
    )
    return Path(root)
