"""Run the `seed` command under tcmalloc where the library is installed.

glibc's malloc keeps the blocks a training forward frees (activations, recomputed chunks) instead of handing them
back, so the resident set of a CPU run grows past what is live; tcmalloc keeps less and ran the default
faster (benchmarks/RESULTS.md, "Memory of the CPU default", 7).
An allocator can only be chosen before the process starts, so the console entry re-executes itself once with
`LD_PRELOAD` set. `SEED_ALLOCATOR=system` keeps glibc's. Library code and tests calling `seed.cli.main` in-process
are untouched.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ALLOCATOR_VAR = "SEED_ALLOCATOR"
ALLOCATORS = ("tcmalloc", "system")
TCMALLOC_NAMES = ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4")
LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")
QUIET_LARGE_ALLOCS = {"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": str(1 << 40)}  # no stderr line per big tensor


def find_tcmalloc(library_dirs: Sequence[str] = LIBRARY_DIRS) -> str | None:
    """The path of an installed tcmalloc, or None."""
    for directory in library_dirs:
        for name in TCMALLOC_NAMES:
            if (Path(directory) / name).is_file():
                return str(Path(directory) / name)
    found = ctypes.util.find_library("tcmalloc_minimal")
    return found if found and Path(found).is_absolute() else None


def chosen_allocator(environ: Mapping[str, str]) -> str:
    """The allocator `SEED_ALLOCATOR` asks for (default tcmalloc); a clear error for any other value."""
    choice = environ.get(ALLOCATOR_VAR, "tcmalloc").strip().lower() or "tcmalloc"
    if choice not in ALLOCATORS:
        raise SystemExit(f"seed: {ALLOCATOR_VAR}={environ[ALLOCATOR_VAR]!r} is not one of {', '.join(ALLOCATORS)}")
    return choice


def preload_environment(environ: Mapping[str, str], library: str | None) -> dict[str, str] | None:
    """The environment to re-execute under, or None when the process should carry on as it is.

    None when the user chose the system allocator, when no tcmalloc is installed, or when it is already preloaded
    (which is also what stops a second re-execution).
    """
    if chosen_allocator(environ) == "system" or library is None or not sys.platform.startswith("linux"):
        return None
    preloaded = environ.get("LD_PRELOAD", "")
    if library in preloaded.replace(":", " ").split():
        return None
    env = {**QUIET_LARGE_ALLOCS, **environ}
    env["LD_PRELOAD"] = f"{library} {preloaded}".strip()
    return env


def reexec_under_tcmalloc(command: Sequence[str]) -> None:
    """Replace this process by `command` with tcmalloc preloaded; return (doing nothing) when that does not apply."""
    env = preload_environment(os.environ, find_tcmalloc())
    if env is None or not command or not command[0]:  # an embedded interpreter has no sys.executable
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(command[0], list(command), env)
