"""A built wheel, installed in a fresh virtualenv, runs the shipped configs from any directory: the configs and
skill libraries are package data, not files the repository happens to have beside the code."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list, cwd: Path, env: dict, timeout: int = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.mark.skipif(sys.platform != "linux", reason="the virtualenv layout (bin/) and the run are checked on Linux")
def test_wheel_in_a_fresh_virtualenv_runs_shipped_configs_from_any_directory(tmp_path):
    source = tmp_path / "source"  # the build writes build/ and *.egg-info beside the sources: not in the checkout
    source.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", source)
    shutil.copy2(ROOT / "README.md", source)
    shutil.copytree(
        ROOT / "src" / "seed", source / "src" / "seed", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            tmp_path / "dist",
            source,
        ],
        tmp_path,
        env,
    )
    wheel = next((tmp_path / "dist").glob("seed_opd-*.whl"))
    venv = tmp_path / "venv"  # the dependencies (torch, transformers, ...) come from this interpreter's site
    _run([sys.executable, "-m", "venv", "--system-site-packages", venv], tmp_path, env)
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], tmp_path, env)

    elsewhere = tmp_path / "elsewhere"  # no configs/ here, and not the repository
    elsewhere.mkdir()
    where = _run(
        [
            venv / "bin" / "python",
            "-c",
            "import seed, seed.config as c; from seed.skills.library import read_skill_library as r; "
            "[c.load_config(p.stem) for p in c.CONFIG_DIR.glob('*.yaml')]; "
            "print(seed.__file__); print(sorted(r('sokoban')))",
        ],
        elsewhere,
        env,
    ).stdout.splitlines()
    assert where[0].startswith(str(venv)), f"imported {where[0]}, not the wheel's copy"
    assert where[1] == "['sokoban']"

    _run([venv / "bin" / "seed", "run", "tiny", "run_dir=run", "train.updates=1", "eval.episodes=2"], elsewhere, env)
    summary = json.loads((elsewhere / "run" / "summary.json").read_text())
    assert set(summary["initial"]) == set(summary["final"]) == {"valid_seen", "valid_unseen"}
    assert list((elsewhere / "run" / "checkpoints").glob("update_00001*"))
    _run([venv / "bin" / "seed", "train", "tiny", "run_dir=train", "train.updates=1"], elsewhere, env)
    assert list((elsewhere / "train" / "checkpoints").glob("update_00001*"))
