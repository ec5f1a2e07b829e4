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
    fields = {}
    for line in info.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    return {
        "cpu_model": fields.get("model name", ""),
        # two CPUs with one model name ("AMD EPYC") can differ in generation, and so in the kernels torch runs
        "cpu_signature": "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping")),
        "bf16_instructions": sorted(flags & {"avx512_bf16", "amx_bf16"}),
    }


def libraries() -> dict:
    """Versions of the libraries whose kernels decide a run's floating-point results."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("torch", "transformers"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def machine() -> dict:
    return {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(), **_cpu()}


def provenance() -> dict:
    return {"command": " ".join(["python", *sys.argv]), **_AT_START, "machine": machine(), "libraries": libraries()}
