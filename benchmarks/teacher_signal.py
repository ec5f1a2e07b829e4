"""Is the skill informative? `seed probe` at the CPU default's start point with and without the skill-following
warm-up, and on trained runs, in one table.

For every `--shares` value: `seed start default warmup.skill_share=S` in its own run directory (the start stages
only), then `seed probe` on it. For every `--runs` directory: `seed probe` on its start point (`reference.pt`) and
on its newest checkpoint. Each probe is a separate `seed` process, as a user runs it.

    cd benchmarks && python teacher_signal.py --shares 0.0 0.5 --runs ../runs/default
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from provenance import ROOT, provenance  # benchmarks/provenance.py (scripts run from this folder)

METRICS = (
    "expert_delta_mean",
    "expert_delta_se",
    "sampled_delta_mean",
    "sampled_delta_se",
    "prefers_expert_share",
    "prefers_expert_se",
    "n",
)


def seed(*args: str) -> float:
    """Run one `seed` command from the repository root; its wall time."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "seed.cli", *args], cwd=ROOT, check=True)
    return time.perf_counter() - t0


def probe(target: str, out: Path, *extra: str) -> dict:
    wall = seed("probe", target, "--json", str(out), *extra)
    result = json.loads(out.read_text())
    result["wall_s"] = wall
    return result


def row(name: str, result: dict) -> str:
    cells = [f"{c}: {r['expert_delta_mean']:+.3f} ± {r['expert_delta_se']:.3f}" for c, r in result["contexts"].items()]
    return f"{name:<28}" + "  ".join(cells)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shares", type=float, nargs="*", default=[0.0, 0.5], help="warmup.skill_share values")
    ap.add_argument("--runs", nargs="*", default=[], help="trained run directories to probe (start and newest)")
    ap.add_argument("--work", default="runs/teacher_signal", help="where the start points go (repository-relative)")
    ap.add_argument("--out", default="results/teacher_signal.json")
    args = ap.parse_args()
    work = ROOT / args.work
    work.mkdir(parents=True, exist_ok=True)
    probes: dict[str, dict] = {}
    for share in args.shares:
        run = work / f"skill_share_{share:g}"
        start_s = seed("start", "default", f"warmup.skill_share={share}", f"run_dir={run}")
        probes[f"start, skill_share={share:g}"] = {
            **probe(str(run), work / f"probe_{share:g}.json"),
            "start_stages_s": start_s,
        }
    for run in map(Path, args.runs):
        run = run.resolve()
        probes[f"{run.name}: start point"] = probe(
            str(run), work / f"probe_{run.name}_start.json", "--checkpoint", str(run / "reference.pt")
        )
        probes[f"{run.name}: trained"] = probe(str(run), work / f"probe_{run.name}_trained.json")
    print("\nexpert-action shift (nats, ± se) per context:")
    for name, result in probes.items():
        print(row(name, result))
    summary = {
        name: {
            "weights": r.get("weights"),
            "wall_s": r["wall_s"],
            "time_s": r["time_s"],
            "panel": r["panel"],
            "scoring": r.get("scoring"),
            "examples": r.get("examples"),
            "contexts": {c: {k: v[k] for k in (*METRICS, "by_source") if k in v} for c, v in r["contexts"].items()},
        }
        for name, r in probes.items()
    }
    out = Path(__file__).parent / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**provenance(), "probes": summary}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
