"""A learning-benchmark run again with invalid steps' advantages capped at 0: does the cap stop a late format break?

Under the official step score an invalid step of a won episode scores the win minus 0.1, so step-level GRPO gives
it nearly a valid step's positive advantage and the update reinforces a response that broke the answer format.
This script takes one finished method of one learning-benchmark seed whose run directories are still on this
machine, trains it again from the same start point on the same tasks with `algo.invalid_advantage=nonpositive`,
evaluates it at the last update, and sets beside the original run, update by update: the rollout invalid rate,
the invalid steps that got a positive advantage, and whether the update's metrics row is bit-for-bit the
original's (the two runs can differ only from the first update that trained on a positive-advantage invalid step).

    cd benchmarks && python invalid_cap.py --seed 1 --method seed --out /tmp/runs/learning2

Prints the table and writes benchmarks/results/invalid_cap.json (one entry per seed and method).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from learning import RESULTS, collect, eval_file, eval_invalid_rates, run_overrides, seed_run_dir
from provenance import provenance

CAP = "algo.invalid_advantage=nonpositive"


def positive_invalid_steps(run_dir: Path) -> list[int]:
    """Per recorded update (episodes/update_*.jsonl, in order): how many invalid steps trained with advantage > 0."""
    counts = []
    for path in sorted((run_dir / "episodes").glob("update_*.jsonl")):
        episodes = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        counts.append(sum(not s["valid"] and (s["advantage"] or 0) > 0 for e in episodes for s in e["steps"]))
    return counts


def metric_rows(run_dir: Path) -> dict[int, dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {r["update"]: r for r in rows if "rollout/invalid_rate" in r}


def same_rows(a: dict, b: dict) -> bool:
    """The update's numbers are equal (wall-clock times aside)."""
    keys = {k for k in a.keys() | b.keys() if not k.startswith("time/")}
    return all(a.get(k) == b.get(k) for k in keys)


def summary(run_dir: Path, last: int) -> dict:
    rows = metric_rows(run_dir)
    curve = collect(run_dir.parent.parent, [int(run_dir.parent.name.removeprefix("seed"))], [run_dir.name])
    return {
        "invalid_rate": [rows[u]["rollout/invalid_rate"] for u in sorted(rows)],
        "positive_invalid_steps": positive_invalid_steps(run_dir),
        "success_last": {s: v[last] for s, v in curve.get(run_dir.name, {}).items() if last in v},
        "eval_invalid_last": eval_invalid_rates(run_dir).get(last),
    }


def run_capped(config: str, base: list[str], seed_dir: Path, method: str, out_dir: Path, updates: int) -> Path:
    """The method again from its start point with the cap, `updates` updates, one evaluation at the end."""
    from seed.config import load_config
    from seed.train.components import build_components
    from seed.train.pipeline import eval_stage, train_stage

    run_dir = seed_run_dir(seed_dir, method, out_dir / seed_dir.name / method)
    if not eval_file(run_dir, updates).exists():
        comps = build_components(load_config(config, run_overrides(config, base, method, run_dir, updates, [CAP])))
        train_stage(comps)
        eval_stage(comps, f"update_{updates:05d}")
    return run_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--method", required=True)
    ap.add_argument("--config", default="default")
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--eval-episodes", type=int, default=64, help="panel size per split (the learning benchmark's)")
    ap.add_argument("--out", default="runs/learning", help="the learning benchmark's run directories")
    ap.add_argument("--cap-out", default="/tmp/runs/invalid_cap", help="where the capped runs go")
    args = ap.parse_args()
    from seed.allocator import reexec_under_tcmalloc

    reexec_under_tcmalloc([sys.executable, *sys.argv])  # the allocator the learning benchmark ran under
    seed_dir = Path(args.out) / f"seed{args.seed}"
    original = seed_dir / args.method
    if not eval_file(original, args.updates).exists():
        sys.exit(f"{original} has no evaluation at update {args.updates}: run the learning benchmark's seed first")
    base = [f"eval.episodes={args.eval_episodes}", f"seed={args.seed}"]
    t0 = time.time()
    capped = run_capped(args.config, base, seed_dir, args.method, Path(args.cap_out), args.updates)
    seconds = time.time() - t0
    a, b = metric_rows(original), metric_rows(capped)
    entry = {
        "original": summary(original, args.updates),
        "capped": summary(capped, args.updates),
        "identical_updates": [u for u in sorted(a) if u in b and same_rows(a[u], b[u])],
        "wall_seconds": round(seconds, 1),
    }
    print(f"seed {args.seed} {args.method}: updates whose metrics are identical: {entry['identical_updates']}")
    for name in ("original", "capped"):
        s = entry[name]
        print(
            f"  {name:8s} invalid per update {s['invalid_rate']}  positive-advantage invalid steps "
            f"{s['positive_invalid_steps']}  success at {args.updates} {s['success_last']}  "
            f"eval invalid {s['eval_invalid_last']}"
        )
    path = RESULTS / "invalid_cap.json"
    record = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    record.update(provenance())
    record["runs"][f"seed{args.seed}/{args.method}"] = entry
    path.write_text(json.dumps(record, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
