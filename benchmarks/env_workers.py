"""Env steps per second with envs in Ray actors (1, 2, 4 workers) against envs in the trainer process.

No model: every turn, each of `--envs` ALFWorld episodes takes a random admissible action (seeded), through the
same batched pool calls the collector makes (`reset([(slot, seed)])`, `step([(slot, action)])`). An episode that
ends is reset to a fresh task, so the batch stays full. Measures what a rollout's env side costs.

    python benchmarks/env_workers.py [--env alfworld] [--envs 16] [--turns 10] [--workers 1 2 4]

Prints the table and writes benchmarks/results/env_workers.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import time
from pathlib import Path

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)
from seed.dist import EnvFault, LocalEnvPool, RayEnvPool
from seed.envs import make

ROOT = Path(__file__).resolve().parents[1]


def measure(pool, envs: int, turns: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    next_task = envs
    t0 = time.perf_counter()
    obs = pool.reset([(s, s) for s in range(envs)])
    t_reset = time.perf_counter() - t0
    steps = faults = 0
    t0 = time.perf_counter()
    for _ in range(turns):
        calls = [(s, rng.choice(o.admissible) if o.admissible else "look") for s, o in enumerate(obs)]
        results = pool.step(calls)
        steps += len(calls)
        redo = []
        for s, r in enumerate(results):
            if isinstance(r, EnvFault):
                faults += 1
                redo.append(s)
            else:
                obs[s] = r[0]
                if r[2] or r[0].won:
                    redo.append(s)
        if redo:  # finished episodes start a fresh task: the batch stays full
            fresh = pool.reset([(s, next_task + i) for i, s in enumerate(redo)])
            next_task += len(redo)
            for s, o in zip(redo, fresh):
                obs[s] = o
    wall = time.perf_counter() - t0
    return {
        "env_steps": steps,
        "seconds": wall,
        "steps_per_second": steps / wall,
        "initial_reset_seconds": t_reset,
        "faults": faults,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    factory = functools.partial(make, args.env, split="train")
    rows = {"in-process": measure(LocalEnvPool(factory), args.envs, args.turns)}
    for n in args.workers:
        pool = RayEnvPool(factory, workers=n)
        measure(pool, n, 1)  # actors up and envs built before the clock starts
        rows[f"ray x{n}"] = measure(pool, args.envs, args.turns)
        pool.close()
    base = rows["in-process"]["steps_per_second"]
    print(f"{'envs in':<12}{'env steps':>10}{'seconds':>9}{'steps/s':>9}{'vs in-process':>15}")
    for name, r in rows.items():
        r["ratio_vs_in_process"] = r["steps_per_second"] / base
        print(
            f"{name:<12}{r['env_steps']:>10}{r['seconds']:>9.1f}{r['steps_per_second']:>9.1f}"
            f"{r['ratio_vs_in_process']:>14.2f}x"
        )
    out = ROOT / "benchmarks" / "results" / "env_workers.json"
    out.write_text(json.dumps({**provenance(), "settings": vars(args), "results": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
