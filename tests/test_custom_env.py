"""A user's env from outside the package: `env.name: module:Class`, trained with `seed train`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from seed.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]


def test_the_example_env_trains_from_its_module_path(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    cmd = [sys.executable, "-m", "seed.cli", "train", "tiny", f"run_dir={tmp_path}"]
    cmd += ["env.name=examples.custom_env:Corridor", "train.updates=1"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert any(r.get("update") == 1 and r["rollout/dropped_episodes"] == 0 for r in rows)
    episode = json.loads((tmp_path / "episodes" / "update_00000.jsonl").read_text().splitlines()[0])
    assert episode["steps"][0]["state"]["observation"].endswith("cells from the exit.")


def test_a_module_class_that_does_not_import_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match="'env.name' = 'no_such_module:Env'.*cannot import Env"):
        load_config("tiny", [f"run_dir={tmp_path}", "env.name=no_such_module:Env"])
