"""SEED's cost per update over GRPO's, on the same rollout batch, side by side in one process.

One batch is collected once; then, from the same weights each time, the GRPO update (advantages -> PPO-clip +
KL + entropy) and the SEED update (analysis -> skills -> teacher re-scoring -> the same update plus the gated
OPD loss) run in turn. Both pay the same rollout, so

    GRPO per update = rollout + update(GRPO)
    SEED per update = rollout + analysis + re-score + update(SEED)

    python benchmarks/cost.py [--config default] [--weights runs/default] [--repeats 3]

The two methods alternate which goes first in each repeat. Each column is the median over repeats (the update
alone varies by +-10% between identical repeats on this machine), and the ratio is that of the median totals.

`--weights` is a run directory whose latest checkpoint is used: after its analyzer SFT, so the policy writes
parseable skills and the re-scoring cost is real. Prints a table, writes benchmarks/results/cost.json.
"""
from __future__ import annotations

import argparse
import copy
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

from seed.config import load_config
from seed.train.checkpoint import latest_checkpoint, load_checkpoint
from seed.train.components import build_components
from seed.train.distill import DistillStage
from seed.train.rl import compute_advantages, make_optimizer, policy_update, task_seeds_for_update
from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="default")
    ap.add_argument("--weights", default="runs/default", help="run directory whose latest checkpoint is loaded")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--update-index", type=int, default=0, help="which update's training tasks form the batch")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="seed-cost-")
    cfg = load_config(args.config, [f"run_dir={tmp}", "distill.kind=seed", "distill.skill_source=policy"])
    comps = build_components(cfg)
    ckpt = latest_checkpoint(Path(args.weights))
    if ckpt is not None:
        comps.policy.model.load_state_dict(load_checkpoint(ckpt)["model"])
        ref = Path(args.weights) / "reference.pt"
        if comps.reference is not None and ref.exists():
            import torch

            comps.reference.model.load_state_dict(torch.load(ref, map_location="cpu"))
    print(f"weights: {ckpt if ckpt else 'the base model (no checkpoint under ' + args.weights + ')'}")
    start = copy.deepcopy(comps.policy.model.state_dict())

    t0 = time.perf_counter()
    episodes = comps.collector("train").collect(comps.policy, task_seeds_for_update(cfg, args.update_index),
                                                cfg.rollout.group_size, comps.rollout_sampling(), id_prefix="bench-")
    t_rollout = time.perf_counter() - t0
    base = compute_advantages(episodes, cfg)
    tokens = sum(len(s.prompt_ids) + len(s.response_ids) for s in base.samples)
    print(f"batch: {len(episodes)} episodes, {len(base.samples)} steps, {tokens} tokens; rollout {t_rollout:.1f}s")

    distill = DistillStage(comps)
    runs: dict[str, list[dict]] = {"grpo": [], "seed": []}
    for repeat in range(args.repeats):
        for method in ("grpo", "seed") if repeat % 2 == 0 else ("seed", "grpo"):
            comps.policy.model.load_state_dict(start)
            batch = compute_advantages(episodes, cfg)
            row = {"rollout": t_rollout, "analysis": 0.0, "rescore": 0.0}
            if method == "seed":
                d = distill.run(1, episodes, batch)
                row.update(analysis=d["time/analysis"], rescore=d["time/rescore"], parse_rate=d["distill/parse_rate"],
                           skill_rate=d["distill/skill_rate"])
            comps.cfg.distill.kind = method if method == "seed" else "none"
            t1 = time.perf_counter()
            stats = policy_update(comps, make_optimizer(comps.policy.model, cfg), batch)
            row["update"] = time.perf_counter() - t1
            row["reference_in_update"] = stats["time/reference"]
            row["total"] = row["rollout"] + row["analysis"] + row["rescore"] + row["update"]
            row["tokens_per_second"] = tokens / (row["total"] - row["rollout"])
            row["peak_rss_mb"] = peak_rss_mb()
            if method == "seed":
                row["active_token_share"] = stats.get("distill/active_token_share", 0.0)
            runs[method].append(row)
            comps.cfg.distill.kind = "seed"
    median = {m: {k: statistics.median(r.get(k, 0.0) for r in rows) for k in rows[0]} for m, rows in runs.items()}
    ratio = median["seed"]["total"] / median["grpo"]["total"]
    print(f"{'method':<7}{'rollout':>9}{'analysis':>10}{'rescore':>9}{'update':>8}{'total':>8}{'tok/s':>8}{'RSS MB':>8}")
    for m, r in median.items():
        print(f"{m:<7}{r['rollout']:>9.1f}{r['analysis']:>10.1f}{r['rescore']:>9.1f}{r['update']:>8.1f}"
              f"{r['total']:>8.1f}{r['tokens_per_second']:>8.0f}{r['peak_rss_mb']:>8.0f}")
    print(f"SEED / GRPO time per update: {ratio:.2f}x (target <= 1.15x); "
          f"skill rate {median['seed'].get('skill_rate', 0):.2f} (medians of {args.repeats} repeats)")
    out = Path(__file__).parent / "results" / "cost.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        **provenance(),
        "config": cfg.to_dict(), "batch": {"episodes": len(episodes), "steps": len(base.samples), "tokens": tokens},
        "runs": runs, "median": median, "seed_grpo_time_ratio": ratio}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
