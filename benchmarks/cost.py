"""SEED's cost per update over GRPO's, on the same rollout batch, side by side in one process.

One batch is collected once; then, from the same weights each time, the GRPO update (advantages -> PPO-clip +
KL + entropy) and the SEED update (analysis -> skills -> teacher re-scoring -> the same update plus the gated
OPD loss) run in turn. Both pay the same rollout, so

    GRPO per update = rollout + update(GRPO)
    SEED per update = rollout + analysis + re-score + update(SEED)

    python benchmarks/cost.py [--config default] [--weights runs/default] [--repeats 5] [--set model.device=cuda]

The two methods alternate which goes first in each repeat. Each column is the median over repeats, and
`seed_grpo_time_ratio` is that of the median totals. The update alone swings by +-10% between identical repeats on
this machine, so two steadier readings are reported as well: the median of the per-repeat ratios
(`seed_grpo_time_ratio_paired`) and the ratio with one update median pooled over both methods
(`seed_grpo_time_ratio_pooled_update`; the two updates differ only by the OPD term).

Where SEED's extra time goes: each SEED repeat also times the analysis prompts' prefill alone (the same engine call
with one new token), and the JSON counts the tokens each pass reads. `seed_grpo_ratio_if_analysis_decoding_free`
is the pooled ratio with the analysis cut to its prefill: what no decoding speed-up can go below, since prefill
and re-score are single exact forwards over the method's prompts.

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

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)
from seed.config import load_config
from seed.models.backend import Sampling
from seed.models.batching import distinct_rows
from seed.skills.rescore import teacher_pairs
from seed.train.checkpoint import latest_checkpoint, load_checkpoint
from seed.train.components import build_components
from seed.train.distill import DistillStage
from seed.train.optim import make_optimizer
from seed.train.rl import compute_advantages, policy_update, task_seeds_for_update


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def analysis_prefill_seconds(analyzer, analysed) -> tuple[float, int]:
    """Seconds to prefill the distinct analysis prompts of the analysed episodes, as the analyzer's own call does
    but with one new token each, and those prompts' tokens."""
    prompts, _ = distinct_rows([tuple(ids) for ids, _ in analyzer.requests(analysed)])
    t0 = time.perf_counter()
    analyzer.backend.generate(
        [list(p) for p in prompts], Sampling(greedy=True, max_new_tokens=1, stop=()), batch_size=analyzer.batch_size
    )
    return time.perf_counter() - t0, sum(len(p) for p in prompts)


def distinct_pair_tokens(prompts: list[list[int]], responses: list[list[int]]) -> int:
    """Tokens one no-grad scoring pass reads: each distinct (prompt, response) pair once, as `logprobs` does."""
    pairs, _ = distinct_rows([(tuple(p), tuple(r)) for p, r in zip(prompts, responses)])
    return sum(len(p) + len(r) for p, r in pairs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="default")
    ap.add_argument("--weights", default="runs/default", help="run directory whose latest checkpoint is loaded")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--update-index", type=int, default=0, help="which update's training tasks form the batch")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override, repeatable (e.g. --set model.device=cuda)",
    )
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="seed-cost-")
    cfg = load_config(args.config, [*args.set, f"run_dir={tmp}", "distill.kind=seed", "distill.skill_source=policy"])
    comps = build_components(cfg)
    ckpt = latest_checkpoint(Path(args.weights))
    if ckpt is not None:
        comps.policy.model.load_state_dict(load_checkpoint(ckpt)["model"])
        ref = Path(args.weights) / "reference.pt"
        if comps.reference is not None and ref.exists():
            from seed.storage import load_verified

            comps.reference.model.load_state_dict(load_verified(ref)["model"])
    print(f"weights: {ckpt if ckpt else 'the base model (no checkpoint under ' + args.weights + ')'}")
    start = copy.deepcopy(comps.policy.model.state_dict())

    t0 = time.perf_counter()
    episodes = comps.collector("train").collect(
        comps.policy,
        task_seeds_for_update(cfg, args.update_index),
        cfg.rollout.group_size,
        comps.rollout_sampling(),
        id_prefix="bench-",
    )
    t_rollout = time.perf_counter() - t0
    base = compute_advantages(episodes, cfg)
    tokens = sum(len(s.prompt_ids) + len(s.response_ids) for s in base.samples)
    print(f"batch: {len(episodes)} episodes, {len(base.samples)} steps, {tokens} tokens; rollout {t_rollout:.1f}s")

    counts = {
        "student_pair_tokens": distinct_pair_tokens(
            [s.prompt_ids for s in base.samples], [s.response_ids for s in base.samples]
        )
    }
    distill = DistillStage(comps)
    runs: dict[str, list[dict]] = {"grpo": [], "seed": []}
    for repeat in range(args.repeats):
        for method in ("grpo", "seed") if repeat % 2 == 0 else ("seed", "grpo"):
            comps.policy.model.load_state_dict(start)
            batch = compute_advantages(episodes, cfg)
            row = {"rollout": t_rollout, "analysis": 0.0, "rescore": 0.0}
            if method == "seed":
                d = distill.run(1, episodes, batch.samples)
                row.update(
                    analysis=d["time/analysis"],
                    rescore=d["time/rescore"],
                    parse_rate=d["distill/parse_rate"],
                    skill_rate=d["distill/skill_rate"],
                )
                analysed = [e for e in episodes if e.analysis is not None]
                prefill_s, counts["analysis_prompt_tokens"] = analysis_prefill_seconds(distill.analyzer, analysed)
                row["analysis_prefill"] = prefill_s
                counts["analysis_new_tokens"] = sum(len(comps.tokenizer.encode(e.analysis["raw"])) for e in analysed)
                _, prompts, responses = teacher_pairs(
                    comps.tokenizer, batch.samples, {e.episode_id: e.skill for e in analysed if e.skill}
                )
                counts["rescore_pair_tokens"] = distinct_pair_tokens(prompts, responses)
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
    print(
        f"{'method':<7}{'rollout':>9}{'analysis':>10}{'rescore':>9}{'update':>8}{'total':>8}{'tok/s':>8}{'RSS MB':>8}"
    )
    for m, r in median.items():
        print(
            f"{m:<7}{r['rollout']:>9.1f}{r['analysis']:>10.1f}{r['rescore']:>9.1f}{r['update']:>8.1f}"
            f"{r['total']:>8.1f}{r['tokens_per_second']:>8.0f}{r['peak_rss_mb']:>8.0f}"
        )
    print(
        f"SEED / GRPO time per update: {ratio:.2f}x (target <= 1.15x); "
        f"skill rate {median['seed'].get('skill_rate', 0):.2f} (medians of {args.repeats} repeats)"
    )
    # The update alone swings by +-10% between identical repeats, and the two update columns do the same work up to
    # the OPD term; two steadier readings: per-repeat ratios (both methods ran back to back), and one pooled update
    # median for both.
    paired = statistics.median(s["total"] / g["total"] for s, g in zip(runs["seed"], runs["grpo"]))
    update = statistics.median(r["update"] for rows in runs.values() for r in rows)
    grpo_pooled = t_rollout + update
    extra = median["seed"]
    pooled = (grpo_pooled + extra["analysis"] + extra["rescore"]) / grpo_pooled
    floor = (grpo_pooled + extra["analysis_prefill"] + extra["rescore"]) / grpo_pooled
    print(f"paired (median of per-repeat ratios) {paired:.2f}x; pooled update median {update:.1f}s: {pooled:.2f}x")
    print(
        f"analysis prefill alone {extra['analysis_prefill']:.1f}s of {extra['analysis']:.1f}s; "
        f"with analysis decoding free, SEED / GRPO (pooled update) would be {floor:.2f}x"
    )
    print("tokens read: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    out = Path(__file__).parent / "results" / "cost.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                **provenance(),
                "config": cfg.to_dict(),
                "batch": {"episodes": len(episodes), "steps": len(base.samples), "tokens": tokens},
                "tokens_read": counts,
                "runs": runs,
                "median": median,
                "seed_grpo_time_ratio": ratio,
                "seed_grpo_time_ratio_paired": paired,
                "seed_grpo_time_ratio_pooled_update": pooled,
                "seed_grpo_ratio_if_analysis_decoding_free": floor,
            },
            indent=2,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
