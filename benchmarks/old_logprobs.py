"""The PPO ratio's old log-probs from the rollout against a recompute (`algo.old_logprobs`), on one real batch.

With several mini-batches the update needs each sample's log-probs under the weights that sampled it. The official
recipe recomputes them with a no-grad pass of the policy; the sampler already computed them while decoding. This
collects one batch of the default config per precision, then from the same weights runs the GRPO update with each
source in turn (alternating which goes first) and reports

- how far the sampler's log-probs are from the recompute's (max and mean absolute difference over response tokens),
- the update's seconds with each source, and of them the no-grad passes (`time/reference`: KL reference + old),
- how far apart the two updates leave the weights (max absolute difference).

`auto` takes the rollout's log-probs only on the fp32 path, where they equal a recompute up to rounding.

    cd benchmarks && python old_logprobs.py [--weights RUN_DIR] [--precisions fp32 bf16] [--repeats 2]

`--weights` is a run directory whose latest checkpoint (or else its `reference.pt`, a start point) is loaded, so the
policy writes valid answers and the advantages are not all zero. Writes benchmarks/results/old_logprobs.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)
from seed.config import load_config
from seed.storage import load_verified
from seed.train.checkpoint import latest_checkpoint, load_checkpoint
from seed.train.components import build_components
from seed.train.optim import make_optimizer
from seed.train.rl import compute_advantages, policy_update, task_seeds_for_update


def start_weights(run_dir: Path) -> dict | None:
    ckpt = latest_checkpoint(run_dir)
    if ckpt is not None:
        return load_checkpoint(ckpt)["model"]
    ref = run_dir / "reference.pt"
    return load_verified(ref)["model"] if ref.exists() else None


def measure(precision: str, args) -> dict:
    tmp = tempfile.mkdtemp(prefix="seed-old-logprobs-")
    cfg = load_config(args.config, [f"model.precision={precision}", f"run_dir={tmp}", "distill.kind=none"])
    comps = build_components(cfg)
    weights = start_weights(Path(args.weights)) if args.weights else None
    if weights is not None:
        comps.policy.model.load_state_dict(weights)
    if comps.wants_reference:
        comps.build_reference()  # the KL reference: a frozen copy of the start weights, as the RL stage builds it
    start = {k: v.clone() for k, v in comps.policy.model.state_dict().items()}
    episodes = comps.collector("train").collect(
        comps.policy, task_seeds_for_update(cfg, 0), cfg.rollout.group_size, comps.rollout_sampling(), id_prefix="b-"
    )
    batch = compute_advantages(episodes, cfg)
    samples = batch.samples
    recomputed = comps.policy.logprobs([s.prompt_ids for s in samples], [s.response_ids for s in samples])
    gaps = [abs(a - b) for s, row in zip(samples, recomputed) for a, b in zip(s.rollout_logps, row)]
    runs: dict[str, list[dict]] = {"recompute": [], "rollout": []}
    after: dict[str, dict] = {}
    for repeat in range(args.repeats):
        for source in ("recompute", "rollout") if repeat % 2 == 0 else ("rollout", "recompute"):
            comps.policy.model.load_state_dict(start)
            cfg.algo.old_logprobs = source
            t0 = time.perf_counter()
            stats = policy_update(comps, make_optimizer(comps.policy.model, cfg), batch)
            runs[source].append({"update_s": time.perf_counter() - t0, "no_grad_passes_s": stats["time/reference"]})
            after[source] = {k: v.clone() for k, v in comps.policy.model.state_dict().items()}
    median = {s: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for s, rows in runs.items()}
    weight_gap = max((after["rollout"][k] - after["recompute"][k]).abs().max().item() for k in start)
    moved = max((after["recompute"][k] - start[k]).abs().max().item() for k in start)
    return {
        "precision": precision,
        "autocast": str(comps.policy.amp_dtype),
        "batch": {"episodes": len(episodes), "steps": len(samples)},
        "response_tokens": sum(len(s.response_ids) for s in samples),
        "nonzero_advantages": int((batch.advantages != 0).sum()),
        "rollout_minus_recompute_logp": {"max_abs": max(gaps), "mean_abs": statistics.fmean(gaps)},
        "runs": runs,
        "median": median,
        "update_time_ratio_rollout_over_recompute": median["rollout"]["update_s"] / median["recompute"]["update_s"],
        "weights_max_abs_gap_after_update": weight_gap,
        "weights_max_abs_move_in_update": moved,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="default")
    ap.add_argument("--weights", default="", help="run directory whose checkpoint (or reference.pt) is loaded")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    torch.manual_seed(0)
    results = [measure(p, args) for p in args.precisions]
    for r in results:
        m, g = r["median"], r["rollout_minus_recompute_logp"]
        print(
            f"{r['precision']}: {r['batch']['steps']} steps; |rollout - recompute| log-prob max {g['max_abs']:.2e} "
            f"mean {g['mean_abs']:.2e}; update {m['recompute']['update_s']:.1f}s (no-grad passes "
            f"{m['recompute']['no_grad_passes_s']:.1f}s) -> {m['rollout']['update_s']:.1f}s "
            f"({m['rollout']['no_grad_passes_s']:.1f}s): {r['update_time_ratio_rollout_over_recompute']:.2f}x; "
            f"weights apart after the update {r['weights_max_abs_gap_after_update']:.1e} "
            f"(the update moved them {r['weights_max_abs_move_in_update']:.1e})"
        )
    out = Path(__file__).parent / "results" / "old_logprobs.json"
    out.write_text(json.dumps({**provenance(), "weights": args.weights, "results": results}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
