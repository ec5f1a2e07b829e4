"""Env steps per second in this process and through the remote protocol (a server on 127.0.0.1), side by side.

For each env: the same random admissible actions from the same task seeds, first in process, then through
`python -m seed.envs.serve` and the `remote` client (one call per step, as the env pool makes them). Prints a
table and writes benchmarks/results/remote_envs.json.

    python benchmarks/remote_envs.py [--steps 400] [--envs sokoban ezpoints alfworld] [--envs-cost scienceworld]

ScienceWorld's step is also timed two ways: through its wrapper (which lists every valid action) and directly.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)

ROOT = Path(__file__).resolve().parents[1]
STEPS = {"alfworld": 100}  # an ALFWorld step takes milliseconds in process; fewer keep the run short


def steps_per_second(env, steps: int, seed: int = 0) -> float:
    rng = random.Random(seed)
    obs, task, taken = env.reset(0), 0, 0
    t0 = time.perf_counter()
    while taken < steps:
        obs, _, done, _ = env.step(rng.choice(obs.admissible))
        taken += 1
        if done:
            task += 1
            obs = env.reset(task)
    return taken / (time.perf_counter() - t0)


def scienceworld_step_cost(steps: int = 40) -> dict:
    """Seconds per step of ScienceWorld's wrapper (which lists every valid action each step) and of the env here
    (the simulator's server directly), on the same gold path."""
    from scienceworld import ScienceWorldEnv as Engine

    from seed.envs import make

    env = make("scienceworld", "train", tasks=["boil"])
    env.reset(0)
    gold = env.expert_plan()[:steps]
    t0 = time.perf_counter()
    for action in gold:
        env.step(action)
    direct = (time.perf_counter() - t0) / len(gold)
    wrapper = Engine("", envStepLimit=100)
    wrapper.load("boil", env.pairs[0][1], "easy")
    wrapper.reset()
    t0 = time.perf_counter()
    for action in gold:
        _, _, _, info = wrapper.step(action)
    listed = (time.perf_counter() - t0) / len(gold)
    env.close()
    wrapper.close()
    return {"steps": len(gold), "direct_s": direct, "wrapper_s": listed, "valid_actions_listed": len(info["valid"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--envs", nargs="+", default=["sokoban", "ezpoints", "alfworld"])
    ap.add_argument("--envs-cost", nargs="*", default=["scienceworld"], help="per-step cost checks")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from seed.envs import make

    rows = {}
    for name in args.envs:
        steps = STEPS.get(name, args.steps)
        local = steps_per_second(make(name, "train"), steps)
        proc = subprocess.Popen(
            [sys.executable, "-m", "seed.envs.serve", name, "--port", "0"], stdout=subprocess.PIPE, text=True
        )
        url = proc.stdout.readline().split(" on ")[1].strip()
        try:
            remote_env = make("remote", "train", url=url)
            remote = steps_per_second(remote_env, steps)
            remote_env.close()
        finally:
            proc.kill()
            proc.wait()
        rows[name] = {"steps": steps, "in_process_per_s": local, "remote_per_s": remote, "ratio": remote / local}
        print(f"{name:10s} in process {local:9.1f} steps/s   remote {remote:8.1f} steps/s   ({remote / local:.2f}x)")
    extra = {}
    if "scienceworld" in args.envs_cost:
        extra["scienceworld_step"] = cost = scienceworld_step_cost()
        print(
            f"scienceworld step: {cost['direct_s'] * 1e3:.1f} ms direct, {cost['wrapper_s'] * 1e3:.1f} ms through the"
            f" wrapper that lists {cost['valid_actions_listed']} valid actions"
        )
    out = ROOT / "benchmarks" / "results" / "remote_envs.json"
    out.write_text(json.dumps({**provenance(), "command": " ".join(sys.argv), "envs": rows, **extra}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
