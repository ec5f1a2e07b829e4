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


def provenance() -> dict:
    return {
        "command": " ".join(["python", *sys.argv]),
        **_AT_START,
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count()},
    }
