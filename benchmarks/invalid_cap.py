"""A learning-benchmark run again with invalid steps' advantages capped at 0: does the cap stop a late format break?

Under the official step score an invalid step of a won episode scores the win minus 0.1, so step-level GRPO gives
it nearly a valid step's positive advantage and the update reinforces a response that broke the answer format.
This script takes one finished method of one learning-benchmark seed whose run directories are still on this
machine, trains it again from the same start point on the same tasks with `algo.invalid_advantage=nonpositive`,
evaluates it at the last update, and sets beside the original run, update by update: the rollout invalid rate,
the invalid steps that got a positive advantage, the invalid steps of won episodes, and whether the update's
metrics row equals the original's. The two runs are not bit-for-bit twins: CPU kernels may round differently from
one process to the next, and sampling carries a difference of the last bit into different episodes.

    cd benchmarks && python invalid_cap.py --seed 1 --method seed --out /tmp/runs/learning2

Since a rerun need not meet the same episodes, `--replay U` holds the episodes fixed instead: it trains one update
on the original run's recorded batch of update U (responses, teacher log-probs, rewards), once with the official
advantages and once capped, from the same weights (each `--weights` run directory's newest checkpoint, AdamW moments
included), and samples `--samples` responses at the rollout temperature for every state of that batch from each
updated policy: the invalid rate after the update says whether that one update breaks the format.

    cd benchmarks && python invalid_cap.py --seed 1 --method seed --out /tmp/runs/learning2 --replay 5 \
        --weights /tmp/runs/learning2/seed1/start /tmp/runs/invalid_cap/seed1/seed

Prints the table and writes benchmarks/results/invalid_cap.json (one entry per seed and method; replays under
`replays`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from learning import (
    RESULTS,
    collect,
    eval_file,
    eval_invalid_rates,
    invalid_rates,
    run_overrides,
    seed_run_dir,
    update_rows,
)
from provenance import provenance

CAP = "algo.invalid_advantage=nonpositive"


def invalid_step_counts(run_dir: Path) -> dict[str, list[int]]:
    """Per recorded update (episodes/update_*.jsonl, in order): the invalid steps that trained with advantage > 0,
    and the invalid steps of won episodes (those the official score rewards; the cap sets theirs to 0)."""
    from seed.storage import read_jsonl

    counts: dict[str, list[int]] = {"positive_invalid_steps": [], "invalid_steps_of_wins": []}
    for path in sorted((run_dir / "episodes").glob("update_*.jsonl")):
        episodes = read_jsonl(path)
        invalid = [(e, s) for e in episodes for s in e["steps"] if not s["valid"]]
        counts["positive_invalid_steps"].append(sum((s["advantage"] or 0) > 0 for _, s in invalid))
        counts["invalid_steps_of_wins"].append(sum(bool(e["won"]) for e, _ in invalid))
    return counts


def same_rows(a: dict, b: dict) -> bool:
    """The update's numbers are equal (wall-clock times and memory aside)."""
    keys = {k for k in a.keys() | b.keys() if not k.startswith(("time/", "memory/"))}
    return all(a.get(k) == b.get(k) for k in keys)


def summary(run_dir: Path, last: int) -> dict:
    curve = collect(run_dir.parent.parent, [int(run_dir.parent.name.removeprefix("seed"))], [run_dir.name])
    return {
        "invalid_rate": invalid_rates(run_dir),
        **invalid_step_counts(run_dir),
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


def recorded_episodes(run_dir: Path, update: int, tokenizer) -> list:
    """The episodes of update `update` (1-based) as the run wrote them, prompts rendered again from their states."""
    from seed.agent.render import render
    from seed.storage import read_jsonl
    from seed.types import Episode, StepSample, StepState

    episodes = []
    for e in read_jsonl(run_dir / "episodes" / f"update_{update - 1:05d}.jsonl"):
        steps = []
        for s in e.pop("steps"):
            state = StepState(**{**s.pop("state"), "images": []})
            state.history = [tuple(pair) for pair in state.history]
            steps.append(StepSample(state, render(state, tokenizer), **s))
        episodes.append(Episode(**e, steps=steps))
    return episodes


def invalid_after(components, states: list, samples: int) -> float:
    """The share of invalid responses the policy samples now, `samples` per state, at the rollout temperature."""
    from seed.agent.parse import parse_action
    from seed.agent.render import render
    from seed.envs.base import action_tags

    r = components.cfg.rollout
    prompts = [ids for st in states for ids in [render(st, components.tokenizer)] * samples]
    gens = components.rollout_backend().generate(prompts, components.rollout_sampling(), r.generation_batch_size)
    tags = action_tags(components.cfg.env.name)
    admissible = [st.admissible for st in states for _ in range(samples)]
    return sum(not parse_action(g.text, a, r.validity, tags).valid for g, a in zip(gens, admissible)) / len(gens)


def replay_one(config: str, overrides: list[str], original: Path, update: int, weights: Path, samples: int) -> dict:
    """One update on the recorded batch of `update`, official and capped, from `weights`' newest checkpoint."""
    from seed.config import load_config
    from seed.train.checkpoint import load_latest_checkpoint
    from seed.train.components import build_components
    from seed.train.parallel import SingleProcess
    from seed.train.rl import compute_advantages, policy_update

    out = {"invalid_steps_of_wins": invalid_step_counts(original)["invalid_steps_of_wins"][update - 1]}
    variants = [("official", []), ("capped", [CAP])] if out["invalid_steps_of_wins"] else [("official", [])]
    for name, extra in variants:  # without an invalid step of a win the cap changes nothing
        comps = build_components(load_config(config, overrides + extra))
        _, state = load_latest_checkpoint(weights, set_aside=False)
        optimizer = SingleProcess().setup(comps, state)
        episodes = recorded_episodes(original, update, comps.tokenizer)
        batch = compute_advantages(episodes, comps.cfg)
        states = [s.state for s in batch.samples]
        before = invalid_after(comps, states, samples) if name == "official" else out["before"]
        stats = policy_update(comps, optimizer, batch, update=update - 1)
        out.update(
            {
                "before": before,
                name: invalid_after(comps, states, samples),
                f"{name}_loss": stats.get("train/loss"),
                f"{name}_grad_norm": stats.get("train/grad_norm"),
            }
        )
        print(f"  weights {weights}: {name} update -> invalid {out[name]:.3f} (before {before:.3f})", flush=True)
    return out


def replay(args, base: list[str], original: Path, record: dict, path: Path) -> None:
    """`--replay`: each weight source's official and capped update on the same recorded batch, written to `record`
    (and `path`) as each source finishes."""
    run_dir = Path(args.cap_out) / f"seed{args.seed}" / f"replay_{args.method}"
    seed_run_dir(original.parent, args.method, run_dir)  # the reference and stage markers of the method's start
    overrides = run_overrides(args.config, base, args.method, run_dir, args.updates)
    results = record.setdefault("replays", {}).setdefault(f"seed{args.seed}/{args.method}/update{args.replay}", {})
    for weights in args.weights:
        for seed in args.replay_seeds or [None]:  # another seed: other mini-batch orders and samples
            extra = [f"seed={seed}"] if seed is not None else []
            one = replay_one(args.config, overrides + extra, original, args.replay, Path(weights), args.samples)
            results[str(weights) + args.label + (f" seed={seed}" if seed is not None else "")] = one
            path.write_text(json.dumps(record, indent=2))
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--method", required=True)
    ap.add_argument("--config", default="default")
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--eval-episodes", type=int, default=64, help="panel size per split (the learning benchmark's)")
    ap.add_argument("--out", default="runs/learning", help="the learning benchmark's run directories")
    ap.add_argument("--original", default="", help="the run to compare (default: <out>/seed<k>/<method>)")
    ap.add_argument("--cap-out", default="/tmp/runs/invalid_cap", help="where the capped runs go")
    ap.add_argument("--replay", type=int, default=0, help="replay the original's update U instead of a rerun")
    ap.add_argument("--weights", nargs="+", default=[], help="--replay: run directories whose checkpoints start it")
    ap.add_argument("--samples", type=int, default=4, help="--replay: responses sampled per state")
    ap.add_argument("--replay-seeds", type=int, nargs="*", default=[], help="--replay: one replay per config seed")
    ap.add_argument("--label", default="", help="--replay: appended to each entry's key (a repeat keeps the first)")
    args = ap.parse_args()
    from seed.allocator import reexec_under_tcmalloc

    reexec_under_tcmalloc([sys.executable, *sys.argv])  # the allocator the learning benchmark ran under
    seed_dir = Path(args.out) / f"seed{args.seed}"
    original = Path(args.original) if args.original else seed_dir / args.method
    if not eval_file(original, args.updates).exists():
        sys.exit(f"{original} has no evaluation at update {args.updates}: run the learning benchmark's seed first")
    base = [f"eval.episodes={args.eval_episodes}", f"seed={args.seed}"]
    path = RESULTS / "invalid_cap.json"
    record = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    record.update(provenance())
    if args.replay:
        replay(args, base, original, record, path)
        return
    t0 = time.time()
    capped = run_capped(args.config, base, seed_dir, args.method, Path(args.cap_out), args.updates)
    seconds = time.time() - t0
    key = f"seed{args.seed}/{args.method}"
    if seconds < 60 and key in record["runs"]:  # nothing was trained now: the run's own seconds stand
        seconds = record["runs"][key]["wall_seconds"]
    a, b = ({row["update"]: row for row in update_rows(run)} for run in (original, capped))
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
            f"  {name:8s} invalid per update {s['invalid_rate']}  invalid steps with advantage > 0 "
            f"{s['positive_invalid_steps']}, of won episodes {s['invalid_steps_of_wins']}  "
            f"success at {args.updates} {s['success_last']}  "
            f"eval invalid {s['eval_invalid_last']}"
        )
    record["runs"][key] = entry
    path.write_text(json.dumps(record, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
