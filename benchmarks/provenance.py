"""What every benchmark JSON records about its own run: the command, the git commit and the machine."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def provenance() -> dict:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    return {"command": " ".join(["python", *sys.argv]), "git_commit": commit,
            "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count()}}
