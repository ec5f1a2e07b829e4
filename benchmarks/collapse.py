"""Format collapse on CPU: which learning rate, mini-batch size and invalid penalty keep GRPO and SEED acting?

GRPO on the CPU default once collapsed (every response invalid, equal rewards in every group, no gradient left).
A recipe passes when, in every seed, both GRPO and SEED keep the rollout invalid rate at or below `--max-invalid`
at every update. The search is by measurement and cheap first: every candidate runs GRPO (the method that
collapsed) on the first seed; candidates that hold run GRPO and SEED on every seed. No evaluation panels are used
(the invalid rate comes from the training rollouts), so the choice is not tuned on them. The learning benchmark's
GRPO and SEED runs (and SEED from the skill-following start) are runs of the default recipe: they count for it where
this search has none of its own for a seed.
A seed's start point is rebuilt in each sitting (it is not kept), so runs of one seed from different sittings may
start from slightly different weights; each run is still a measurement of its recipe from a start point of that seed.

Runs start from one of the learning benchmark's start points (`--start`): `start_sfw`, the CPU default's own warm-up
with skill following (the collapses seen so far all came from such starts), or `start`, the plain warm-up the
learning benchmark's methods share. A start is built at `<out>/seed<k>/<start>` without its evaluation when
missing, and reused by benchmarks/learning.py in the same sitting. Runs live in
`<out>/seed<k>/collapse/<start>/<candidate>/<method>/` with a checkpoint after every update, so the script can be
killed and restarted at any point:

    nohup python benchmarks/collapse.py > collapse.log 2>&1 &
    python benchmarks/collapse.py --report-only

Prints the table of each start point and writes benchmarks/results/collapse.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import learning  # benchmarks/learning.py: the shared start points and run-directory seeding
from provenance import provenance

CANDIDATES: dict[str, list[str]] = {  # name -> overrides; the first is the CPU default's recipe
    "default": [],
    "lr1e-5": ["algo.lr=1.0e-5"],
    "mb32": ["algo.mini_batch_size=32"],
    "penalty0.5": ["rollout.invalid_penalty=0.5"],
    "lr1e-5_mb32": ["algo.lr=1.0e-5", "algo.mini_batch_size=32"],
}
METHODS = ("grpo", "seed")
# (start point, method) -> the learning benchmark's method that runs the default recipe so: its runs count here
LEARNING_TWINS = {("start", "grpo"): "grpo", ("start", "seed"): "seed", ("start_sfw", "seed"): "seed_sfw"}
ARCHIVE = learning.RESULTS / "collapse_runs"  # per-update metrics of every finished run: the report reads these


def run_dir_of(out: Path, seed: int, start_point: str, candidate: str, method: str) -> Path:
    return out / f"seed{seed}" / "collapse" / start_point / candidate / method


def archived_rates(seed: int, start_point: str, candidate: str, method: str) -> list[float]:
    """A run's invalid rates from the archive: its own or, for the default recipe, the learning benchmark's run of
    the same method from the same start point (the same overrides, so the same recipe)."""
    rates = learning.invalid_rates(run_dir_of(ARCHIVE, seed, start_point, candidate, method))
    twin = LEARNING_TWINS.get((start_point, method)) if candidate == "default" else None
    twin_rates = learning.invalid_rates(learning.ARCHIVE / f"seed{seed}" / twin) if twin else []
    return twin_rates if len(twin_rates) > len(rates) else rates


def train_candidate(
    config: str, base: list[str], out: Path, seed: int, start_point: str, candidate: str, method: str, updates: int
) -> None:
    from seed.config import load_config
    from seed.train.components import build_components
    from seed.train.pipeline import train_stage

    seed_dir = out / f"seed{seed}"
    run_dir = run_dir_of(out, seed, start_point, candidate, method)
    if len(archived_rates(seed, start_point, candidate, method)) >= updates:
        return
    learning.build_start(config, base, seed_dir, start_point, evaluate=False)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    learning.seed_run_dir(seed_dir, method, run_dir, start_point)
    overrides = learning.run_overrides(
        config, base, method, run_dir, updates, extra=CANDIDATES[candidate], start_point=start_point
    )
    t0 = time.time()
    train_stage(build_components(load_config(config, overrides)))
    learning.archive(run_dir, run_dir_of(ARCHIVE, seed, start_point, candidate, method))
    print(
        f"[seed{seed} {start_point} {candidate} {method}] {updates} updates: {time.time() - t0:.0f}s, invalid rate "
        f"{' '.join(f'{r:.2f}' for r in learning.invalid_rates(run_dir))}",
        flush=True,
    )


def holds(rates: list[float], updates: int, max_invalid: float) -> bool | None:
    """True/False once every update ran; None while unfinished (a collapse already seen is False at once)."""
    if any(r > max_invalid for r in rates):
        return False
    return True if len(rates) >= updates else None


def report(seeds: list[int], start_point: str, updates: int, max_invalid: float) -> dict:
    table: dict = {}
    for candidate in CANDIDATES:
        for method in METHODS:
            for seed in seeds:
                rates = archived_rates(seed, start_point, candidate, method)
                if rates:
                    table.setdefault(candidate, {}).setdefault(method, {})[str(seed)] = {
                        "invalid_rate": rates,
                        "max": max(rates),
                        "holds": holds(rates, updates, max_invalid),
                    }
    verdict = {}
    for candidate, methods in table.items():
        runs = [r for m in METHODS for r in methods.get(m, {}).values()]
        complete = all(str(s) in methods.get(m, {}) for m in METHODS for s in seeds)
        if any(r["holds"] is False for r in runs):
            verdict[candidate] = "collapses"
        else:
            verdict[candidate] = "passes" if complete and all(r["holds"] for r in runs) else "unfinished"
    print(f"\nfrom {start_point}: max rollout invalid rate over {updates} updates (per seed), threshold {max_invalid}:")
    for candidate, methods in table.items():
        for method, per_seed in methods.items():
            cells = " ".join(f"s{s}={r['max']:.2f}{'' if r['holds'] is not None else '…'}" for s, r in per_seed.items())
            print(f"  {candidate:<14} {method:<5} {cells}")
        print(f"  {candidate:<14} -> {verdict[candidate]}")
    return {"runs": table, "verdict": verdict}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="default")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--max-invalid", type=float, default=0.2)
    ap.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    ap.add_argument(
        "--start",
        default="start_sfw",
        choices=list(learning.START_POINTS),
        help="the start point's warm-up: start_sfw is the CPU default's own (skill following), start the "
        "plain one the learning benchmark shares",
    )
    ap.add_argument("--eval-episodes", type=int, default=64, help="the start points' panel size (as learning.py's)")
    ap.add_argument("--out", default="runs/learning", help="shared with benchmarks/learning.py (its start points)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("overrides", nargs="*", help="extra key=value config overrides for every run")
    args = ap.parse_args()
    from seed.allocator import reexec_under_tcmalloc

    reexec_under_tcmalloc([sys.executable, *sys.argv])  # the allocator the `seed` command runs under
    out = Path(args.out)

    def base(seed: int) -> list[str]:  # the learning benchmark's, so the start points it builds are the same
        return [f"eval.episodes={args.eval_episodes}", *args.overrides, f"seed={seed}"]

    t0 = time.time()
    if not args.report_only:
        first = args.seeds[0]
        for candidate in args.candidates:  # screen: GRPO on the first seed
            train_candidate(args.config, base(first), out, first, args.start, candidate, "grpo", args.updates)
        for candidate in args.candidates:  # survivors: both methods on every seed
            rates = archived_rates(first, args.start, candidate, "grpo")
            if holds(rates, args.updates, args.max_invalid) is False:
                continue
            for seed in args.seeds:
                for method in METHODS:
                    train_candidate(args.config, base(seed), out, seed, args.start, candidate, method, args.updates)
    by_start = {start: report(args.seeds, start, args.updates, args.max_invalid) for start in learning.START_POINTS}
    learning.RESULTS.mkdir(parents=True, exist_ok=True)
    record = {
        **provenance(),
        "candidates": CANDIDATES,
        "start_points": learning.START_POINTS,
        "seeds": args.seeds,
        "updates": args.updates,
        "max_invalid": args.max_invalid,
        "wall_seconds_this_invocation": time.time() - t0,
        "by_start": by_start,
    }
    (learning.RESULTS / "collapse.json").write_text(json.dumps(record, indent=2))
    print(f"wrote {learning.RESULTS / 'collapse.json'}")


if __name__ == "__main__":
    main()
