"""What every benchmark JSON records about its own run: the command, the git commit and the machine.

The commit is read when the script starts (this module is imported first), so a long run records the code it
ran even if commits land while it runs; `dirty` says whether tracked files differed from that commit."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout.strip()


_AT_START = {
    "git_commit": _git("rev-parse", "HEAD"),
    "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
}


def _cpu() -> dict:
    """The CPU's model name and its native bf16 instructions (Linux /proc/cpuinfo): what decides `precision: auto`
    and most of a CPU timing."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    return {"cpu_model": model, "bf16_instructions": sorted(flags & {"avx512_bf16", "amx_bf16"})}


def provenance() -> dict:
    machine = {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(), **_cpu()}
    return {"command": " ".join(["python", *sys.argv]), **_AT_START, "machine": machine}
