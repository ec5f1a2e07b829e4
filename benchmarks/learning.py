"""Learning curves: GRPO, GiGPO, SEED and its peers, same tasks, seeds and budget, with seeds enough to rank them.

For every seed, one start point is built once (the config's start stages: format warm-up, oracle labels, analyzer
SFT) and evaluated; every method then trains from that same checkpoint, on the same training tasks (fixed per
update and seed), for the same number of updates, and is evaluated on the same fixed `valid_seen` /
`valid_unseen` panels every `--eval-every` updates. So the methods differ only in their update rule:

    grpo      GRPO, the official step-level form (the config's `algo.grpo_over`), no distillation
    gigpo     GRPO + GiGPO's step-level advantage from anchor-state groups
    seed      GRPO + gated OPD with skills the policy writes about its own episodes (the config's analyzer)
    seed_sfw  the same update from a start point whose format warm-up also taught skill following
    sdar      GRPO + gated OPD with one static skill per task type (configs/skills/<env>.yaml)
    opsd      GRPO + ungated OPD whose teacher context is privileged: the expert's solution of the task
    sibling   GRPO + gated OPD whose teacher sees another successful episode of the same group

The shared start point's warm-up is the plain format warm-up of the paper recipes (`warmup.skill_share=0`);
`seed_sfw` is the one method with its own start point (same seed, same labelled tasks), built with the skill-following
warm-up, since that warm-up is what it measures.

Every run lives in `<out>/seed<k>/<method>/`, saves a checkpoint after every update and resumes from it; finished
evaluations are never redone, so a kill loses at most the update in flight (it runs for hours in the background).
The run directories stay on the machine; what git keeps is the archive (`results/learning_runs`, with each piece of
work's wall seconds in `timing.json`). A later sitting on the same machine resumes from the run directories; one on
another machine rebuilds a seed's start point and continues its unfinished methods only where the rebuilt weights
equal the first build's (their digest is archived; a rebuild on another kind of CPU differs), so run a seed's methods
in one sitting where machines change between sittings:

    nohup python benchmarks/learning.py > learning.log 2>&1 &
    python benchmarks/learning.py --report-only      # tables + plot from whatever has finished

Prints the tables, writes benchmarks/results/learning.json and learning.png (when matplotlib is installed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import shutil
import sys
import time
from pathlib import Path

from provenance import libraries, machine, provenance  # benchmarks/provenance.py (scripts run from this folder)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ARCHIVE = RESULTS / "learning_runs"  # the small files of every finished evaluation: the report reads these

METHODS: dict[str, list[str]] = {
    "grpo": ["distill.kind=none"],
    "gigpo": ["distill.kind=none", "algo.advantage=gigpo"],
    "seed": ["distill.kind=seed", "distill.skill_source=policy"],
    "seed_sfw": ["distill.kind=seed", "distill.skill_source=policy"],
    "sdar": ["distill.kind=seed", "distill.skill_source=library"],
    "opsd": ["distill.kind=opsd", "distill.skill_source=privileged"],
    "sibling": ["distill.kind=seed", "distill.skill_source=sibling"],
}
START_POINTS: dict[str, list[str]] = {  # start point name -> its warm-up; methods not listed below use "start"
    "start": ["warmup.skill_share=0", "warmup.foreign_skill_share=0"],
    "start_sfw": ["warmup.skill_share=0.5", "warmup.foreign_skill_share=0.5"],
}
OWN_START = {"seed_sfw": "start_sfw"}
PANELS = ("valid_seen", "valid_unseen", "all")


def update_rows(run_dir: Path) -> list[dict]:
    """The metrics rows of a run's (or its archive's) finished updates, in update order; stage rows (update 0) have
    no rollout and are left out."""
    from seed.train.metrics import read_metrics

    return sorted((row for row in read_metrics(run_dir) if "rollout/invalid_rate" in row), key=lambda r: r["update"])


def invalid_rates(run_dir: Path) -> list[float]:
    """The rollout invalid rate of each finished update of a run (or its archive), in order."""
    return [row["rollout/invalid_rate"] for row in update_rows(run_dir)]


def reinforced_invalid(run_dir: Path) -> int | None:
    """The invalid steps a run's updates trained with a positive advantage (`rollout/invalid_reinforced`, summed;
    None for runs that predate the metric): where it is 0, `algo.invalid_advantage` changed nothing in the run."""
    rows = update_rows(run_dir)
    if not rows or any("rollout/invalid_reinforced" not in row for row in rows):
        return None
    return sum(int(row["rollout/invalid_reinforced"]) for row in rows)


def eval_invalid_rates(run_dir: Path) -> dict[int, float]:
    """The evaluation panels' invalid rate (both panels, the larger) at each evaluated update of a run."""
    rates = {}
    for path in sorted(run_dir.glob("eval_update_*.json")):
        panels = json.loads(path.read_text())
        values = [p["invalid_rate"] for p in panels.values() if isinstance(p, dict) and "invalid_rate" in p]
        if values:
            rates[int(path.stem.rsplit("_", 1)[1])] = max(values)
    return rates


def start_of(method: str) -> str:
    return OWN_START.get(method, "start")


def method_overrides(method: str, env_name: str) -> list[str]:
    extra = [f"distill.library_path={ROOT / 'configs' / 'skills' / f'{env_name}.yaml'}"] if method == "sdar" else []
    return METHODS[method] + extra


def eval_file(run_dir: Path, update: int) -> Path:
    return run_dir / f"eval_update_{update:05d}.json"


def build_start(config: str, base: list[str], seed_dir: Path, name: str = "start", evaluate: bool = True) -> None:
    """Start stages + the update-0 evaluation, once per seed and start point (the stages are skipped when their
    markers exist, so a start built without its evaluation is evaluated later without being rebuilt)."""
    from seed.config import load_config
    from seed.train.components import build_components
    from seed.train.pipeline import eval_stage, load_latest_weights, prepare_run_dir, start_stages

    start = seed_dir / name
    checkpoint_0 = start / "checkpoints" / "update_00000.pt"
    if eval_file(start, 0).exists() or (not evaluate and checkpoint_0.exists()):
        return
    cfg = load_config(config, base + START_POINTS[name] + [f"run_dir={start}"])
    prepare_run_dir(cfg)
    comps = build_components(cfg)
    t0, built = time.time(), checkpoint_0.exists()
    start_stages(comps)  # writes checkpoint 0 and reference.pt
    if not checkpoint_0.exists():  # no start stage enabled: the base model
        from seed.train.pipeline import _save_start_point

        load_latest_weights(comps)
        _save_start_point(comps, {})
    if not built:
        record_seconds(start, "start stages", time.time() - t0)
    check_start(start, seed_dir.name, name)
    if evaluate:
        t0 = time.time()
        eval_stage(comps, "update_00000")
        record_seconds(start, "eval update 0", time.time() - t0)
        archive(start, ARCHIVE / seed_dir.name / name)


def weights_digest(path: Path) -> str:
    """SHA-256 over a verified weights file's tensors (names, dtypes, shapes and bytes): equal only for equal
    weights, whatever the file's serialisation."""
    import torch

    from seed.storage import load_verified

    digest = hashlib.sha256()
    for name, tensor in sorted(load_verified(path)["model"].items()):
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def check_start(start: Path, seed_name: str, name: str) -> None:
    """A start point built in this sitting may serve methods trained from one built in an earlier sitting only if
    its weights are the same: the archive records the first
    build's weight digest, and a rebuild that differs is refused. Methods archived before digests were recorded
    cannot be checked, so they need their own sitting, as before."""
    record = ARCHIVE / seed_name / name / "start_weights.json"
    digest = weights_digest(start / "reference.pt")
    trained = [m for m in METHODS if start_of(m) == name and list((ARCHIVE / seed_name / m).glob("eval_update_*"))]
    here = {**machine(), **libraries()}
    if record.exists():
        first = json.loads(record.read_text())
        if first["sha256"] != digest:
            raise SystemExit(
                f"{start} was rebuilt with other weights than the start point {', '.join(trained) or 'its methods'} "
                f"of {seed_name} trained from ({differences(first.get('built_on'), here)}); remove "
                f"{ARCHIVE / seed_name} to redo {seed_name} in one sitting"
            )
        return
    if trained:
        raise SystemExit(
            f"{ARCHIVE / seed_name} holds methods ({', '.join(trained)}) trained from a start point whose weights "
            f"were not recorded, and that start is gone; remove that folder to redo {seed_name}"
        )
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"sha256": digest, "file": "reference.pt", "built_on": here}, indent=2))


def differences(first: dict | None, here: dict) -> str:
    """Which recorded facts of the first build's machine differ here: CPUs of one model name can run other kernels
    (different float results), so a seed's start point is only rebuilt exactly on the same kind of machine."""
    if first is None:
        return "the first build recorded no machine facts"
    changed = [f"{k}: {first.get(k)} there, {here.get(k)} here" for k in sorted(here) if first.get(k) != here.get(k)]
    return "; ".join(changed) if changed else "same recorded machine facts and library versions"


def record_seconds(run_dir: Path, what: str, seconds: float) -> None:
    """Add one finished piece of work's wall seconds to the run's `timing.json` (a piece cut short by a kill is not
    recorded), so the report can say what a seed costs in machine time on the machine that ran it."""
    from seed.storage import atomic_write_text

    path = run_dir / "timing.json"
    pieces = json.loads(path.read_text()) if path.exists() else []
    pieces.append({"what": what, "seconds": round(seconds, 1)})
    atomic_write_text(path, json.dumps(pieces, indent=1))


def archive(run_dir: Path, dest: Path) -> None:
    """Copy a run's evaluations, per-update metrics and stage rows (kilobytes) where git can keep them: a run
    directory holds checkpoints and is not kept (a later sitting rebuilds a seed's start point and goes on only if
    its weights are the same, `check_start`), and the report is built from the archive of every sitting. Each seed
    records the commit and machine that ran it."""
    dest.mkdir(parents=True, exist_ok=True)
    small = [run_dir / "metrics.jsonl", run_dir / "timing.json"]
    for path in [*run_dir.glob("eval_update_*.json"), *run_dir.glob("stage_*.json"), *small]:
        if path.exists():
            shutil.copy2(path, dest / path.name)
    ran_on = dest.parent / "provenance.json"
    if not ran_on.exists():
        ran_on.write_text(json.dumps(provenance(), indent=2))


def seed_run_dir(seed_dir: Path, method: str, run_dir: Path | None = None, start_point: str | None = None) -> Path:
    """A method's run directory (default `<seed_dir>/<method>`), seeded with its start point's (default: the
    method's own) checkpoint, reference, update-0 evaluation and stage markers; filled beside it and renamed, so a
    kill leaves none half-made."""
    run_dir = run_dir or seed_dir / method
    start = seed_dir / (start_point or start_of(method))
    if not run_dir.exists():
        filling = run_dir.with_name(run_dir.name + ".filling")
        shutil.rmtree(filling, ignore_errors=True)
        (filling / "checkpoints").mkdir(parents=True)
        for name in ["reference.pt", "eval_update_00000.json", *[p.name for p in start.glob("stage_*.json")]]:
            if (start / name).exists():  # a start built for the collapse search has no evaluation
                shutil.copy2(start / name, filling / name)
        shutil.copy2(start / "checkpoints" / "update_00000.pt", filling / "checkpoints" / "update_00000.pt")
        filling.rename(run_dir)
    return run_dir


def evaluation_points(updates: int, every: int) -> list[int]:
    return list(range(every, updates + 1, every)) + ([updates] if updates % every else [])


def finished(run_dir: Path, updates: int, every: int) -> bool:
    return all(eval_file(run_dir, end).exists() for end in evaluation_points(updates, every))


def run_overrides(
    config: str,
    base: list[str],
    method: str,
    run_dir: Path,
    updates: int,
    extra: list[str] = (),
    start_point: str | None = None,
) -> list[str]:
    """A method's run from its start point (default: the method's own): the start's warm-up settings (so its stage
    markers hold), the method, `extra`, and a checkpoint after every update (a kill loses at most the update in
    flight)."""
    from seed.config import load_config

    return (
        base
        + START_POINTS[start_point or start_of(method)]
        + method_overrides(method, load_config(config, base).env.name)
        + list(extra)
        + [f"run_dir={run_dir}", f"train.updates={updates}", "train.checkpoint_every=1", "train.keep_checkpoints=1"]
    )


def train_method(config: str, base: list[str], seed_dir: Path, method: str, updates: int, every: int) -> None:
    from seed.config import load_config
    from seed.train.components import build_components
    from seed.train.pipeline import eval_stage, train_stage

    run_dir = seed_run_dir(seed_dir, method)
    ends = evaluation_points(updates, every)
    if finished(run_dir, updates, every):
        return
    comps = build_components(load_config(config, run_overrides(config, base, method, run_dir, updates)))
    for end in ends:
        if eval_file(run_dir, end).exists():
            continue
        t0, done = time.time(), len(invalid_rates(run_dir))  # updates finished before (in an earlier sitting, too)
        comps.cfg.train.updates = end
        train_stage(comps)
        record_seconds(run_dir, f"updates {done + 1}-{end}", time.time() - t0)
        t1 = time.time()
        eval_stage(comps, f"update_{end:05d}")
        record_seconds(run_dir, f"eval update {end}", time.time() - t1)
        archive(run_dir, ARCHIVE / seed_dir.name / method)
        print(f"[{seed_dir.name} {method}] updates -> {end} + eval: {time.time() - t0:.0f}s", flush=True)


# ----------------------------------------------------------------------------------------------------- report
def complete_seeds(out: Path, seeds: list[int], methods: list[str], updates: int, every: int) -> list[int]:
    """The seeds whose every method has all its evaluations: the tables compare methods over the same seeds, so a
    seed in progress stays out of them (its runs still show in the invalid-rate and machine-time tables)."""
    return [s for s in seeds if all(finished(out / f"seed{s}" / m, updates, every) for m in methods)]


def mean_se(values: list[float]) -> tuple[float, float | None]:
    """Mean and standard error over seeds; no standard error from one seed (None, not 0)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, None
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1)) / math.sqrt(n)


def _se(se: float | None) -> str:
    return f"±{se:.3f}" if se is not None else "±  —  "


def collect(out: Path, seeds: list[int], methods: list[str]) -> dict:
    """curves[method][split][update] = per-seed success list ('all' pools both panels, weighted by size), from a
    directory laid out as `<out>/seed<k>/<method>/eval_update_*.json` (the archive, or a live run directory)."""
    curves: dict = {}
    for method in methods:
        for seed in seeds:
            for f in sorted((out / f"seed{seed}" / method).glob("eval_update_*.json")):
                update = int(f.stem.split("_")[-1])
                res = json.loads(f.read_text())
                n = sum(r["overall"]["n"] for r in res.values())
                pooled = sum(r["overall"]["success"] * r["overall"]["n"] for r in res.values()) / n
                for split, value in [*((s, r["overall"]["success"]) for s, r in res.items()), ("all", pooled)]:
                    curves.setdefault(method, {}).setdefault(split, {}).setdefault(update, {})[seed] = value
    return curves


def invalid_table(out: Path, seeds: list[int], methods: list[str]) -> dict:
    """table[method][seed] = the rollout invalid rate of every update and their maximum: a format collapse (every
    response invalid, no gradient left) shows here before it shows on the panels. The evaluations' invalid rates
    ride along (`eval`, `eval_max`): a collapse in a run's last update shows only there; so does the count of
    invalid steps trained with a positive advantage (`reinforced`), where the run logged it."""
    table: dict = {}
    for method in methods:
        for seed in seeds:
            run = out / f"seed{seed}" / method
            rates, evaluated = invalid_rates(run), eval_invalid_rates(run)
            if rates:
                table.setdefault(method, {})[str(seed)] = {"invalid_rate": rates, "max": max(rates)}
            if evaluated:
                row = table.setdefault(method, {}).setdefault(str(seed), {})
                row["eval"] = {str(u): r for u, r in evaluated.items()}
                row["eval_max"] = max(evaluated.values())
            reinforced = reinforced_invalid(run)
            if reinforced is not None:
                table.setdefault(method, {}).setdefault(str(seed), {})["reinforced"] = reinforced
    return table


def summarise(curves: dict, seeds: list[int], episodes_per_update: int) -> dict:
    """Mean ± SE over seeds per method, panel and update; a point counts once every seed has it."""
    table: dict = {}
    for method, splits in curves.items():
        for split, points in splits.items():
            for update, per_seed in sorted(points.items()):
                if len(per_seed) < len(seeds):
                    continue
                m, se = mean_se([per_seed[s] for s in seeds])
                table.setdefault(method, {}).setdefault(split, []).append(
                    {
                        "update": update,
                        "episodes": update * episodes_per_update,
                        "mean": m,
                        "se": se,
                        "per_seed": {str(s): per_seed[s] for s in seeds},
                    }
                )
    return table


def paired_minus(table: dict, method: str, baseline: str = "grpo") -> dict:
    """Per panel, at the last update both have for every seed: mean ± SE over seeds of (method − baseline)."""
    out = {}
    for split in PANELS:
        a = {p["update"]: p["per_seed"] for p in table.get(method, {}).get(split, [])}
        b = {p["update"]: p["per_seed"] for p in table.get(baseline, {}).get(split, [])}
        common = sorted(set(a) & set(b))
        if not common:
            continue
        update = common[-1]
        diffs = [a[update][s] - b[update][s] for s in a[update]]
        m, se = mean_se(diffs)
        out[split] = {
            "update": update,
            "mean": m,
            "se": se,
            "n_seeds": len(diffs),
            "per_seed": dict(zip(a[update], diffs)),
        }
    return out


def episodes_to_reach(curve: list[tuple[int, float]], target: float) -> float:
    """Training episodes at which a success curve first reaches `target`, linear between evaluation points (inf
    when it never does within the budget)."""
    if not curve:
        return math.inf
    if curve[0][1] >= target:
        return float(curve[0][0])
    for (e0, y0), (e1, y1) in zip(curve, curve[1:]):  # y0 < target here
        if y1 >= target:
            return e0 + (e1 - e0) * (target - y0) / (y1 - y0)
    return math.inf


def reach_grpo_final(table: dict, resamples: int = 2000, seed: int = 0) -> dict:
    """Episodes each method needs to reach GRPO's final success (both panels), with a 95% bootstrap interval over
    seeds (the seeds are resampled together for all methods, so the comparison stays paired)."""
    grpo = table.get("grpo", {}).get("all", [])
    if not grpo:
        return {}
    seeds = list(grpo[0]["per_seed"])

    def estimate(sample: list[str]) -> dict[str, float]:
        def mean_curve(method: str) -> list[tuple[int, float]]:
            return [(p["episodes"], sum(p["per_seed"][s] for s in sample) / len(sample)) for p in table[method]["all"]]

        target = mean_curve("grpo")[-1][1]
        return {m: episodes_to_reach(mean_curve(m), target) for m in table if table[m].get("all")}

    point = estimate(seeds)
    rng = random.Random(seed)
    draws = [estimate([rng.choice(seeds) for _ in seeds]) for _ in range(resamples)]
    out = {}
    for method, value in point.items():
        values = sorted(d[method] for d in draws)
        lo, hi = values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))]
        out[method] = {
            "episodes": _finite(value),
            "interval_95": [_finite(lo), _finite(hi)],
            "share_of_resamples_never_reaching": sum(math.isinf(v) for v in values) / len(values),
        }
    return {"grpo_final_success": grpo[-1]["mean"], "methods": out}


def _finite(x: float) -> float | None:
    return None if math.isinf(x) else round(x, 1)


def machine_seconds(out: Path, seeds: list[int]) -> dict:
    """Per seed, the wall seconds of its recorded pieces of work (start points, updates, evaluations) per run and in
    total, with the CPU that ran them: what the benchmark costs, machine by machine."""
    table = {}
    for seed in seeds:
        seed_dir = out / f"seed{seed}"
        runs = {
            path.parent.name: sum(piece["seconds"] for piece in json.loads(path.read_text()))
            for path in sorted(seed_dir.glob("*/timing.json"))
        }
        if runs:
            ran_on = seed_dir / "provenance.json"
            cpu = json.loads(ran_on.read_text()).get("machine", {}) if ran_on.exists() else {}
            table[str(seed)] = {
                "total": round(sum(runs.values()), 1),
                "per_run": runs,
                "cpu": {k: cpu.get(k) for k in ("cpu_model", "cpu_signature", "bf16_instructions")},
            }
    return table


def print_invalid(invalid: dict) -> None:
    print("\nInvalid rate, the highest over a run's rollouts / over its evaluations, per seed:")
    for method, per_seed in invalid.items():
        nan = float("nan")
        cells = [f"s{s}={r.get('max', nan):.2f}/{r.get('eval_max', nan):.2f}" for s, r in per_seed.items()]
        print(f"  {method:<9} " + " ".join(cells))
    reinforced = {f"{m} s{s}": r["reinforced"] for m, p in invalid.items() for s, r in p.items() if "reinforced" in r}
    if reinforced:
        print("Invalid steps trained with a positive advantage (runs that logged them): " + str(reinforced))


def print_tables(table: dict, paired: dict, reach: dict) -> None:
    for split in PANELS:
        rows = {m: s.get(split, []) for m, s in table.items()}
        updates = sorted({p["update"] for r in rows.values() for p in r})
        if not updates:
            continue
        n_seeds = len(next(r for r in rows.values() if r)[0]["per_seed"])
        print(f"\n{split}: success (mean ± SE over {n_seeds} seed{'s' if n_seeds != 1 else ''}) by update")
        print(f"{'method':<9}" + "".join(f"{u:>15}" for u in updates))
        for method, points in rows.items():
            by_u = {p["update"]: p for p in points}
            print(
                f"{method:<9}"
                + "".join(
                    f"{by_u[u]['mean']:>9.3f} {_se(by_u[u]['se'])}" if u in by_u else f"{'—':>15}" for u in updates
                )
            )
    print("\nPaired difference method − GRPO per seed (mean ± SE over seeds), last common update:")
    for method, panels in paired.items():
        print(
            f"  {method:<9}"
            + "  ".join(
                f"{split} {d['mean']:+.3f} {_se(d['se'])} (n={d['n_seeds']}, u{d['update']})"
                for split, d in panels.items()
            )
        )
    if reach:
        print(
            f"\nTraining episodes to reach GRPO's final success on both panels ({reach['grpo_final_success']:.3f}),"
            " 95% bootstrap interval over seeds (None: not within the budget):"
        )
        for method, r in reach["methods"].items():
            print(
                f"  {method:<9} {r['episodes']}  [{r['interval_95'][0]}, {r['interval_95'][1]}]"
                f"  never in {r['share_of_resamples_never_reaching']:.0%} of resamples"
            )


def plot(table: dict, path: Path) -> bool:
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
        for method, s in table.items():
            pts = s.get(split, [])
            if pts:
                x = [p["episodes"] for p in pts]
                y = [p["mean"] for p in pts]
                e = [p["se"] or 0.0 for p in pts]
                ax.errorbar(x, y, yerr=e, label=method, marker="o", capsize=3)
        ax.set_title(split)
        ax.set_xlabel("training episodes")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("success (mean ± SE over seeds)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right")  # beside the panels, not over a curve
    fig.tight_layout(rect=(0, 0, 0.87, 1))
    fig.savefig(path, dpi=120)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="default")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--eval-every", type=int, default=3)
    ap.add_argument("--eval-episodes", type=int, default=64, help="panel size per split")
    ap.add_argument("--out", default="runs/learning")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("overrides", nargs="*", help="extra key=value config overrides for every run")
    args = ap.parse_args()
    from seed.allocator import reexec_under_tcmalloc

    reexec_under_tcmalloc([sys.executable, *sys.argv])  # the allocator the `seed` command runs under
    from seed.config import load_config

    out = Path(args.out)
    base = [f"eval.episodes={args.eval_episodes}", *args.overrides]
    t0 = time.time()
    if not args.report_only:
        for seed in args.seeds:  # seed-major: a partial run still has every method for the first seeds
            seed_dir = out / f"seed{seed}"
            todo = [m for m in args.methods if not finished(ARCHIVE / seed_dir.name / m, args.updates, args.eval_every)]
            for method in todo:  # a start rebuilt in a later sitting must equal the archived one (check_start)
                build_start(args.config, base + [f"seed={seed}"], seed_dir, start_of(method))
                train_method(args.config, base + [f"seed={seed}"], seed_dir, method, args.updates, args.eval_every)
    cfg = load_config(args.config, base)
    seeds = complete_seeds(ARCHIVE, args.seeds, args.methods, args.updates, args.eval_every)
    in_progress = [s for s in args.seeds if s not in seeds and (ARCHIVE / f"seed{s}").exists()]
    print(f"seeds with every method finished: {seeds}; in progress (not in the tables): {in_progress}")
    table = summarise(
        collect(ARCHIVE, seeds, args.methods), seeds, cfg.rollout.tasks_per_update * cfg.rollout.group_size
    )
    paired = {m: paired_minus(table, m) for m in table if m != "grpo"}
    reach = reach_grpo_final(table)
    invalid = invalid_table(ARCHIVE, args.seeds, args.methods)
    cost = machine_seconds(ARCHIVE, args.seeds)
    print_tables(table, paired, reach)
    print_invalid(invalid)
    for seed, c in cost.items():
        print(f"seed {seed}: {c['total'] / 3600:.2f} h of recorded work on {c['cpu']}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = {
        **provenance(),
        "config": cfg.to_dict(),
        "methods": args.methods,
        "method_overrides": {m: METHODS[m] for m in args.methods},
        "start_points": {m: START_POINTS[start_of(m)] for m in args.methods},
        "seeds": seeds,
        "seeds_in_progress": in_progress,
        "updates": args.updates,
        "eval_every": args.eval_every,
        "eval_rooms_per_split": args.eval_episodes,
        "wall_seconds_this_invocation": time.time() - t0,
        "curves": table,
        "paired_seed_minus_grpo": paired.get("seed", {}),
        "paired_minus_grpo": paired,
        "episodes_to_reach_grpo_final": reach,
        "invalid_rate": invalid,
        "machine_seconds": cost,
    }
    (RESULTS / "learning.json").write_text(json.dumps(record, indent=2))
    if plot(table, RESULTS / "learning.png"):
        print(f"wrote {RESULTS / 'learning.png'}")
    print(f"wrote {RESULTS / 'learning.json'}")


if __name__ == "__main__":
    main()
