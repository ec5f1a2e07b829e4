"""Collector throughput: env steps per second with finished episodes leaving the generation batch, against a
lock-step collector that keeps generating for them, on the same grouped batch (mixed episode lengths).

    python benchmarks/collector.py [--model smollm2-135m-instruct] [--tasks 8] [--group 4]

Prints a table and writes benchmarks/results/collector.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)
from seed.config import load_config
from seed.train.components import build_components
from seed.train.pipeline import load_latest_weights


class Lockstep:
    """A backend as collectors without compaction use it: every generation call runs as many rows as the
    rollout's first (finished episodes keep generating; their outputs are dropped). The extra rows repeat live
    prompts, whose shared prefixes the backend prefills once, so the lock-step cost is if anything understated."""

    def __init__(self, backend):
        self.backend, self.rows = backend, 0

    def generate(self, prompts, sampling, batch_size=64, images=None):
        self.rows = max(self.rows, len(prompts))
        extra = [i % len(prompts) for i in range(self.rows - len(prompts))]
        padded = prompts + [prompts[i] for i in extra]
        images = None if images is None else images + [images[i] for i in extra]
        return self.backend.generate(padded, sampling, batch_size=batch_size, images=images)[: len(prompts)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="default")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument(
        "--run-dir",
        default="runs/default",
        help="use this run's latest checkpoint, a policy that wins some episodes early (mixed lengths)",
    )
    args = ap.parse_args()
    cfg = load_config(
        args.config,
        [
            f"model.name={args.model}",
            "warmup.enabled=false",
            f"env.max_steps={args.max_steps}",
            f"run_dir={args.run_dir}",
        ],
    )
    comps = build_components(cfg, with_reference=False)
    loaded = load_latest_weights(comps)
    print(f"weights: {'update ' + str(loaded) + ' of ' + args.run_dir if loaded else 'the base model'}")
    collector = comps.collector("train")
    seeds = list(range(args.tasks))
    rows = {}
    for mode in ("compacting", "lockstep") * args.repeats:
        comps.policy.generator.manual_seed(0)
        t0 = time.perf_counter()
        backend = Lockstep(comps.policy) if mode == "lockstep" else comps.policy
        eps = collector.collect(backend, seeds, args.group, comps.rollout_sampling())
        dt = time.perf_counter() - t0
        steps = sum(len(e.steps) for e in eps)
        lengths = sorted(len(e.steps) for e in eps)
        r = rows.setdefault(mode, {"seconds": [], "env_steps": steps, "episode_lengths": lengths})
        r["seconds"].append(dt)
    for r in rows.values():
        r["best_seconds"] = min(r["seconds"])
        r["steps_per_second"] = r["env_steps"] / r["best_seconds"]
    ratio = rows["compacting"]["steps_per_second"] / rows["lockstep"]["steps_per_second"]
    print(f"{'collector':<12}{'env steps':>10}{'best s':>9}{'steps/s':>9}")
    for mode, r in rows.items():
        print(f"{mode:<12}{r['env_steps']:>10}{r['best_seconds']:>9.1f}{r['steps_per_second']:>9.2f}")
    print(f"compacting / lockstep throughput: {ratio:.2f}x (target >= 1.3x)")
    out = Path(__file__).parent / "results" / "collector.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({**provenance(), "config": cfg.to_dict(), "results": rows, "throughput_ratio": ratio}, indent=2)
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
