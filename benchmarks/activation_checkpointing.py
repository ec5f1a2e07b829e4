"""Peak memory and time of every stage with `model.activation_checkpointing` off and on, side by side.

Each setting runs the real pipeline (`seed run`) in its own process on a shortened default: a smaller warm-up,
fewer labelled tasks, short evaluation panels and a few updates, with the default's batch shapes (token budget,
mini-batches, prompts). Peak RSS per phase comes from summary.json (the kernel's high-water mark, reset per phase);
seconds per phase likewise (summary.json's seconds_by_phase).

    python benchmarks/activation_checkpointing.py [--updates 2] [--out results/activation_checkpointing.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)

SHORT = ["warmup.episodes=8", "warmup.epochs=1", "label.tasks=8", "eval.episodes=8"]


def run(setting: bool, updates: int, root: Path) -> dict:
    run_dir = root / f"ckpt_{str(setting).lower()}"
    cmd = [
        sys.executable,
        "-m",
        "seed.cli",
        "run",
        "default",
        f"run_dir={run_dir}",
        f"train.updates={updates}",
        f"train.checkpoint_every={updates}",
        f"model.activation_checkpointing={str(setting).lower()}",
        *SHORT,
    ]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    updates_rows = [r for r in rows if r["update"] > 0]
    return {
        "activation_checkpointing": setting,
        "wall_s": wall,
        "peak_rss_mb": summary["peak_rss_mb"],
        "peak_rss_by_phase_mb": summary["peak_rss_by_phase_mb"],
        "update_s": [r["time/update"] for r in updates_rows],
        "seconds_by_phase": summary["seconds_by_phase"],
        "initial": summary["initial"],
        "final": summary["final"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--out", default="results/activation_checkpointing.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [run(setting, args.updates, Path(tmp)) for setting in (False, True)]
    off, on = results
    print("phase        peak RSS off → on (MB)    seconds off → on")
    for phase in off["peak_rss_by_phase_mb"]:
        mb = off["peak_rss_by_phase_mb"][phase], on["peak_rss_by_phase_mb"].get(phase, 0)
        s = off["seconds_by_phase"].get(phase, 0), on["seconds_by_phase"].get(phase, 0)
        print(f"{phase:<12} {mb[0]:>6} → {mb[1]:>6}            {s[0]:>6.0f} → {s[1]:>6.0f}")
    print(f"peak         {off['peak_rss_mb']:>6.0f} → {on['peak_rss_mb']:>6.0f}")
    print(
        f"wall         {off['wall_s']:>6.0f} → {on['wall_s']:>6.0f} s; update {sum(off['update_s']):.0f} → "
        f"{sum(on['update_s']):.0f} s over {args.updates} updates"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": results, "short": SHORT, "provenance": provenance()}, indent=2))
    print(f"saved {out}")


if __name__ == "__main__":
    main()
