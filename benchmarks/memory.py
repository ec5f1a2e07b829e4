"""Memory over many updates: the process's RSS after every update of one training run, and its slope.

    python benchmarks/memory.py [--config default] [--updates 20] [--start-from runs/default]

`--start-from` copies that run's start point (checkpoint 0: the model after warm-up and analyzer SFT, and the KL
reference) into a fresh run directory, so the measurement spends its time on RL updates; a run that no longer
holds checkpoint 0 (keep_checkpoints) is ignored and the start stages run first. The slope is a least-
squares fit of RSS (MB) on the update index over updates 2..N (update 1 allocates the optimizer state and the
caches). Prints the series, writes benchmarks/results/memory.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from fit import slope  # benchmarks/fit.py
from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)
from seed.config import load_config
from seed.train.components import build_components
from seed.train.metrics import read_metrics
from seed.train.pipeline import train_stage


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="default")
    ap.add_argument("--updates", type=int, default=20)
    ap.add_argument("--start-from", default="runs/default", help="run directory whose checkpoint 0 is the start")
    args = ap.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="seed-memory-"))
    src = Path(args.start_from)
    if (src / "checkpoints" / "update_00000.pt").exists():
        (run_dir / "checkpoints").mkdir()
        shutil.copy(src / "checkpoints" / "update_00000.pt", run_dir / "checkpoints")
        for name in ("reference.pt", "stage_warmup.json", "stage_sft.json", "labels.jsonl"):
            if (src / name).exists():
                shutil.copy(src / name, run_dir)
    print(f"start: {'checkpoint 0 of ' + str(src) if (run_dir / 'checkpoints').exists() else 'the start stages'}")
    cfg = load_config(
        args.config, [f"run_dir={run_dir}", f"train.updates={args.updates}", f"train.checkpoint_every={args.updates}"]
    )
    train_stage(build_components(cfg))
    rows = [r for r in read_metrics(run_dir) if "memory/rss_mb" in r]
    xs, ys = [float(r["update"]) for r in rows], [r["memory/rss_mb"] for r in rows]
    fit = slope(xs[1:], ys[1:]) if len(xs) > 2 else float("nan")
    print(f"{'update':>6}{'RSS MB':>9}")
    for x, y in zip(xs, ys):
        print(f"{int(x):>6}{y:>9.0f}")
    print(f"RSS slope over updates 2..{int(xs[-1])}: {fit:+.2f} MB/update (first {ys[0]:.0f} MB, last {ys[-1]:.0f} MB)")
    out = Path(__file__).parent / "results" / "memory.json"
    out.write_text(
        json.dumps(
            {
                **provenance(),
                "config": cfg.to_dict(),
                "rss_mb_by_update": dict(zip(map(int, xs), ys)),
                "slope_mb_per_update": fit,
            },
            indent=2,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
