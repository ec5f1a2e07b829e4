"""Learning curves: GRPO, GiGPO, SEED, an SDAR-style static library and plain OPSD, same tasks, seeds and budget.

For every seed, one start point is built once (the config's start stages: format warm-up, oracle labels, analyzer
SFT) and evaluated; every method then trains from that same checkpoint, on the same training tasks (fixed per
update and seed), for the same number of updates, and is evaluated on the same fixed `valid_seen` /
`valid_unseen` panels every `--eval-every` updates. So the methods differ only in their update rule:

    grpo   episode-level GRPO advantage (distill.kind=none)
    gigpo  GRPO + GiGPO's step-level advantage from anchor-state groups
    seed   GRPO + gated OPD with skills the policy writes about its own episodes (the config's analyzer)
    sdar   GRPO + gated OPD with one static skill per task type (configs/skills/<env>.yaml)
    opsd   GRPO + ungated OPD whose teacher context is privileged: the expert's solution of the task

Every run lives in `<out>/seed<k>/<method>/` and resumes from its last checkpoint; finished evaluations are never
redone, so the script can be killed and restarted at any point (it runs for hours in the background):

    nohup python benchmarks/learning.py > learning.log 2>&1 &
    python benchmarks/learning.py --report-only      # tables + plot from whatever has finished

Prints the tables, writes benchmarks/results/learning.json and learning.png (when matplotlib is installed).
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from pathlib import Path
from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

METHODS: dict[str, list[str]] = {
    "grpo": ["distill.kind=none"],
    "gigpo": ["distill.kind=none", "algo.advantage=gigpo"],
    "seed": ["distill.kind=seed", "distill.skill_source=policy"],
    "sdar": ["distill.kind=seed", "distill.skill_source=library"],
    "opsd": ["distill.kind=opsd", "distill.skill_source=privileged"],
}


def method_overrides(method: str, env_name: str) -> list[str]:
    extra = [f"distill.library_path={ROOT / 'configs' / 'skills' / f'{env_name}.yaml'}"] if method == "sdar" else []
    return METHODS[method] + extra


def eval_file(run_dir: Path, update: int) -> Path:
    return run_dir / f"eval_update_{update:05d}.json"


def build_start(config: str, base: list[str], seed_dir: Path) -> None:
    """Start stages + the update-0 evaluation, once per seed."""
    from seed.config import load_config
    from seed.train.components import build_components
    from seed.train.pipeline import eval_stage, load_latest_weights, prepare_run_dir, start_stages

    start = seed_dir / "start"
    if eval_file(start, 0).exists():
        return
    cfg = load_config(config, base + [f"run_dir={start}"])
    prepare_run_dir(cfg)
    comps = build_components(cfg)
    start_stages(comps)  # writes checkpoint 0 and reference.pt
    if not (start / "checkpoints" / "update_00000.pt").exists():  # no start stage enabled: the base model
        from seed.train.pipeline import _save_start_point

        load_latest_weights(comps)
        _save_start_point(comps, {})
    eval_stage(comps, "update_00000")


def seed_run_dir(seed_dir: Path, method: str) -> Path:
    """A method's run directory, seeded with the start point's checkpoint, reference and stage markers."""
    run_dir = seed_dir / method
    start = seed_dir / "start"
    if not (run_dir / "checkpoints").exists():
        (run_dir / "checkpoints").mkdir(parents=True)
        for name in ["reference.pt", "eval_update_00000.json", *[p.name for p in start.glob("stage_*.json")]]:
            shutil.copy2(start / name, run_dir / name)
        shutil.copy2(start / "checkpoints" / "update_00000.pt", run_dir / "checkpoints" / "update_00000.pt")
    return run_dir


def train_method(config: str, base: list[str], seed_dir: Path, method: str, updates: int, every: int) -> None:
    from seed.config import load_config
    from seed.train.components import build_components
    from seed.train.pipeline import eval_stage, train_stage

    run_dir = seed_run_dir(seed_dir, method)
    ends = list(range(every, updates + 1, every)) + ([updates] if updates % every else [])
    if all(eval_file(run_dir, e).exists() for e in ends):
        return
    cfg = load_config(config, base + method_overrides(method, load_config(config, base).env.name) + [
        f"run_dir={run_dir}", f"train.updates={updates}", f"train.checkpoint_every={every}",
        "train.keep_checkpoints=1"])
    comps = build_components(cfg)
    for end in ends:
        if eval_file(run_dir, end).exists():
            continue
        t0 = time.time()
        comps.cfg.train.updates = end
        train_stage(comps)
        eval_stage(comps, f"update_{end:05d}")
        print(f"[{seed_dir.name} {method}] updates -> {end} + eval: {time.time() - t0:.0f}s", flush=True)


# ----------------------------------------------------------------------------------------------------- report
def mean_se(values: list[float]) -> tuple[float, float]:
    n = len(values)
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return m, sd / math.sqrt(n)


def collect(out: Path, seeds: list[int], methods: list[str]) -> dict:
    """curves[method][split][update] = per-seed success list ('all' pools both panels, weighted by size)."""
    curves: dict = {}
    for method in methods:
        for seed in seeds:
            run_dir = out / f"seed{seed}" / method
            for f in sorted(run_dir.glob("eval_update_*.json")):
                update = int(f.stem.split("_")[-1])
                res = json.loads(f.read_text())
                n = sum(r["overall"]["n"] for r in res.values())
                pooled = sum(r["overall"]["success"] * r["overall"]["n"] for r in res.values()) / n
                for split, value in [*((s, r["overall"]["success"]) for s, r in res.items()), ("all", pooled)]:
                    curves.setdefault(method, {}).setdefault(split, {}).setdefault(update, {})[seed] = value
    return curves


def summarise(curves: dict, seeds: list[int], episodes_per_update: int) -> dict:
    table: dict = {}
    for method, splits in curves.items():
        for split, points in splits.items():
            for update, per_seed in sorted(points.items()):
                if len(per_seed) < len(seeds):
                    continue  # a point counts once every seed has it
                m, se = mean_se([per_seed[s] for s in seeds])
                table.setdefault(method, {}).setdefault(split, []).append(
                    {"update": update, "episodes": update * episodes_per_update, "mean": m, "se": se,
                     "per_seed": {str(s): per_seed[s] for s in seeds}})
    target = None
    if "grpo" in table and table["grpo"].get("all"):
        target = table["grpo"]["all"][-1]["mean"]
    reach = {}
    for method, splits in table.items():
        hit = next((p for p in splits.get("all", []) if target is not None and p["mean"] >= target), None)
        reach[method] = hit["episodes"] if hit else None
    start = table["grpo"]["all"][0]["mean"] if target is not None else None
    degenerate = target is not None and target <= start
    return {"curves": table, "grpo_final_success": target, "episodes_to_reach_grpo_final": reach,
            "grpo_final_at_or_below_start": degenerate}


def print_tables(summary: dict) -> None:
    for split in ("valid_seen", "valid_unseen", "all"):
        rows = {m: s.get(split, []) for m, s in summary["curves"].items()}
        updates = sorted({p["update"] for r in rows.values() for p in r})
        if not updates:
            continue
        n_seeds = len(next(iter(rows.values()))[0]["per_seed"]) if any(rows.values()) else 0
        print(f"\n{split}: success (mean ± SE over {n_seeds} seed{'s' if n_seeds != 1 else ''}; one seed has no SE)"
              f" by update" if n_seeds == 1 else f"\n{split}: success (mean ± SE over {n_seeds} seeds) by update")
        print(f"{'method':<8}" + "".join(f"{u:>15}" for u in updates))
        for method, points in rows.items():
            by_u = {p["update"]: p for p in points}
            print(f"{method:<8}" + "".join(f"{by_u[u]['mean']:>9.3f} ±{by_u[u]['se']:.3f}" if u in by_u else
                                           f"{'—':>15}" for u in updates))
    print(f"\nGRPO's final success (both panels): {summary['grpo_final_success']}")
    if summary["grpo_final_at_or_below_start"]:
        print("  (GRPO ended at or below the start point: every method 'reaches' it at update 0)")
    for method, eps in summary["episodes_to_reach_grpo_final"].items():
        print(f"  {method:<8} reaches it after {eps if eps is not None else 'not within the budget'}"
              f"{' training episodes' if eps is not None else ''}")


def plot(summary: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install -e '.[bench]'): no plot")
        return False
    splits = ("valid_seen", "valid_unseen")
    fig, axes = plt.subplots(1, len(splits), figsize=(10, 4), sharey=True)
    for ax, split in zip(axes, splits):
        for method, s in summary["curves"].items():
            pts = s.get(split, [])
            if pts:
                x = [p["update"] for p in pts]
                y = [p["mean"] for p in pts]
                e = [p["se"] for p in pts]
                ax.errorbar(x, y, yerr=e, label=method, marker="o", capsize=3)
        ax.set_title(split)
        ax.set_xlabel("update")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("success (mean ± SE over seeds)")
    axes[-1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="default")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--eval-every", type=int, default=3)
    ap.add_argument("--eval-episodes", type=int, default=16, help="panel size per split")
    ap.add_argument("--out", default="runs/learning")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("overrides", nargs="*", help="extra key=value config overrides for every run")
    args = ap.parse_args()
    from seed.config import load_config

    out = Path(args.out)
    base = [f"eval.episodes={args.eval_episodes}", *args.overrides]
    t0 = time.time()
    if not args.report_only:
        for seed in args.seeds:  # seed-major: a partial run still has every method for the first seeds
            seed_dir = out / f"seed{seed}"
            build_start(args.config, base + [f"seed={seed}"], seed_dir)
            for method in args.methods:
                train_method(args.config, base + [f"seed={seed}"], seed_dir, method, args.updates, args.eval_every)
    cfg = load_config(args.config, base)
    summary = summarise(collect(out, args.seeds, args.methods), args.seeds,
                        cfg.rollout.tasks_per_update * cfg.rollout.group_size)
    print_tables(summary)
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = {
        **provenance(),
        "config": cfg.to_dict(), "methods": {m: METHODS[m] for m in args.methods}, "seeds": args.seeds,
        "updates": args.updates, "eval_every": args.eval_every, "eval_episodes_per_split": args.eval_episodes,
        "wall_seconds_this_invocation": time.time() - t0, **summary,
    }
    (RESULTS / "learning.json").write_text(json.dumps(record, indent=2))
    if plot(summary, RESULTS / "learning.png"):
        print(f"wrote {RESULTS / 'learning.png'}")
    print(f"wrote {RESULTS / 'learning.json'}")


if __name__ == "__main__":
    main()
