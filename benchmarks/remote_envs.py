"""Env steps per second in this process and through the remote protocol (a server on 127.0.0.1), side by side.

For each env: the same actions from the same task seeds, first in process, then through `python -m
seed.envs.serve` and the `remote` client (one call per step, as the env pool makes them). An action is the
expert's next move half of the time and a random admissible one otherwise; envs that list no admissible actions
(Search-QA's free text, ScienceWorld's thousands) take the expert's move. WebShop runs on the tests' stand-in of its
text environment (its data cannot be fetched here), so its row measures the shim and the protocol, not WebShop.
Prints a table and writes benchmarks/results/remote_envs.json.

    python benchmarks/remote_envs.py [--steps 400] [--envs sokoban ezpoints alfworld search_qa scienceworld webshop]
        [--envs-cost scienceworld]

ScienceWorld's step is also timed two ways: through its wrapper (which lists every valid action) and directly.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)

ROOT = Path(__file__).resolve().parents[1]
STEPS = {"alfworld": 100, "scienceworld": 100}  # steps of milliseconds in process: fewer keep the run short
KWARGS = {"scienceworld": {"tasks": ["boil"]}, "webshop": {"backend": "webshop_standin:StandinTextEnv"}}
STANDIN_DIR = ROOT / "tests"  # webshop_standin.py


def next_action(env, obs, rng: random.Random) -> str:
    moves = [a for a in obs.admissible if "<" not in a]  # a template such as search[<your query>] is no action
    plan = env.expert_plan()
    if plan and (not moves or rng.random() < 0.5):
        return plan[0]
    return rng.choice(moves or plan or ["look around"])


def steps_per_second(env, steps: int, seed: int = 0) -> float:
    rng = random.Random(seed)
    obs, task, taken = env.reset(0), 0, 0
    t0 = time.perf_counter()
    while taken < steps:
        obs, _, done, _ = env.step(next_action(env, obs, rng))
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
    ap.add_argument(
        "--envs", nargs="+", default=["sokoban", "ezpoints", "alfworld", "search_qa", "scienceworld", "webshop"]
    )
    ap.add_argument("--envs-cost", nargs="*", default=["scienceworld"], help="per-step cost checks")
    args = ap.parse_args()
    sys.path[:0] = [str(ROOT / "src"), str(STANDIN_DIR)]
    from seed.envs import make

    server_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STANDIN_DIR), os.environ.get("PYTHONPATH", "")])}
    rows = {}
    for name in args.envs:
        steps, kwargs = STEPS.get(name, args.steps), KWARGS.get(name, {})
        local_env = make(name, "train", **kwargs)
        local = steps_per_second(local_env, steps)
        local_env.close()
        proc = subprocess.Popen(
            [sys.executable, "-m", "seed.envs.serve", name, "--port", "0", "--kwargs", json.dumps(kwargs)],
            stdout=subprocess.PIPE,
            text=True,
            env=server_env,
        )
        url = proc.stdout.readline().split(" on ")[1].strip()
        try:
            remote_env = make("remote", "train", url=url, **kwargs)
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
    out.write_text(json.dumps({**provenance(), "envs": rows, **extra}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
