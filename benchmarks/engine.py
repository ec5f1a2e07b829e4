"""The HF backend's exact optimisations against its plain paths, side by side on one real batch.

Decoding (SEED's analysis step, and the batch's step prompts as one rollout-like generation):
    plain     one left-padded prefill of the whole batch; K/V appended by concatenation (transformers' default)
    reserved  the same prefill; K/V written into storage reserved for the token budget
    bucketed  prefill in length buckets (<= 10% padding each), merged into one reserved cache for decoding
    shared    also, repeated prompts prefill once and the prefix all prompts share prefills once (the default)
Scoring (SEED's teacher re-score, no grad; the update's student forward + backward):
    plain     the prefix all prompts share runs once, then every distinct prompt's remainder
    grouped   also, prompts sharing >= 16 more tokens (an episode's skill block; a group's first steps) run
              that stretch once

Prompts come from one rollout batch of the default config on the given weights. Settings run interleaved,
`--repeats` times; the best time of each counts.

    python benchmarks/engine.py [--config default] [--weights runs/default] [--repeats 2]

Prints a table, writes benchmarks/results/engine.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from pathlib import Path

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)
from seed.config import load_config
from seed.models.batching import prompt_sharing_batches
from seed.skills.rescore import rescore
from seed.train.checkpoint import latest_checkpoint, load_checkpoint
from seed.train.components import build_components
from seed.train.distill import DistillStage
from seed.train.rl import task_seeds_for_update

DECODING = {
    "plain": {"prefill_padding": None, "reserve_kv": False, "share_prefill": False},
    "reserved": {"prefill_padding": None, "reserve_kv": True, "share_prefill": False},
    "bucketed": {"prefill_padding": 0.1, "reserve_kv": True, "share_prefill": False},
    "shared": {"prefill_padding": 0.1, "reserve_kv": True, "share_prefill": True},
}
SCORING = {"plain": {"group_prefix_tokens": None}, "grouped": {"group_prefix_tokens": 16}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="default")
    ap.add_argument("--weights", default="runs/default", help="run directory whose latest checkpoint is loaded")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    cfg = load_config(
        args.config,
        [f"run_dir={tempfile.mkdtemp(prefix='seed-engine-')}", "distill.kind=seed", "distill.skill_source=policy"],
    )
    comps = build_components(cfg)
    ckpt = latest_checkpoint(Path(args.weights))
    if ckpt is not None:
        comps.policy.model.load_state_dict(load_checkpoint(ckpt)["model"])
    print(f"weights: {ckpt if ckpt else 'the base model (no checkpoint under ' + args.weights + ')'}")
    policy, tok, budget = comps.policy, comps.tokenizer, cfg.algo.token_budget
    episodes = comps.collector("train").collect(
        policy, task_seeds_for_update(cfg, 0), cfg.rollout.group_size, comps.rollout_sampling(), id_prefix="bench-"
    )
    finished = [e for e in episodes if e.error is None and e.steps]
    analyzer = DistillStage(comps).analyzer
    samples = [s for e in finished for s in e.steps if s.response_ids]
    prompts, responses = [s.prompt_ids for s in samples], [s.response_ids for s in samples]
    skills = {e.episode_id: a.skill for e, (_, a) in zip(finished, analyzer.analyse(finished)) if a.skill}
    print(f"batch: {len(finished)} episodes, {len(samples)} steps, {len(skills)} skills")

    def student_update(backend) -> list[float]:
        out = []
        for micro in prompt_sharing_batches(prompts, responses, budget):
            logp, mask, _ = backend.forward_logps([prompts[i] for i in micro], [responses[i] for i in micro])
            (logp * mask).sum().backward()
            out += [logp[j, : len(responses[i])].tolist() for j, i in enumerate(micro)]
        backend.model.zero_grad(set_to_none=True)
        return out

    def analyse(backend) -> list[str]:
        on_backend = copy.copy(analyzer)  # the run's analyzer, decoding on this setting's engine
        on_backend.backend = backend
        return [raw for raw, _ in on_backend.analyse(finished)]

    workloads = {
        "analysis": (DECODING, analyse),
        "step prompts": (
            DECODING,
            lambda backend: [
                g.text for g in backend.generate(prompts, comps.rollout_sampling(), cfg.rollout.generation_batch_size)
            ],
        ),
        "re-score": (SCORING, lambda backend: rescore(backend, tok, samples, skills, budget)),
        "student fwd+bwd": (SCORING, student_update),
    }
    times = {w: {s: [] for s in settings} for w, (settings, _) in workloads.items()}
    outputs: dict[str, dict] = {w: {} for w in workloads}
    for _ in range(args.repeats):
        for w, (settings, run) in workloads.items():
            for name, switches in settings.items():
                backend = policy.with_options(**switches)
                backend.generator.manual_seed(0)  # the same samples for every setting, up to numerics
                t0 = time.perf_counter()
                outputs[w][name] = run(backend)
                times[w][name].append(time.perf_counter() - t0)
    best = {w: {s: min(t) for s, t in by.items()} for w, by in times.items()}
    speedup = {w: {s: by["plain"] / t for s, t in by.items()} for w, by in best.items()}
    agree = {w: {s: _agreement(out, by["plain"]) for s, out in by.items()} for w, by in outputs.items()}
    print(f"{'workload':<17}{'setting':<10}{'best s':>8}{'vs plain':>10}{'agreement':>11}")
    for w, by in best.items():
        for s, t in by.items():
            print(f"{w:<17}{s:<10}{t:>8.1f}{speedup[w][s]:>9.2f}x{agree[w][s]:>11}")
    print("(agreement: decoding, the share of outputs identical to plain's; scoring, the largest log-prob difference)")
    out = Path(__file__).parent / "results" / "engine.json"
    out.write_text(
        json.dumps(
            {
                **provenance(),
                "config": cfg.to_dict(),
                "batch": {"episodes": len(finished), "steps": len(samples)},
                "seconds": times,
                "best_seconds": best,
                "speedup_over_plain": speedup,
                "agreement_with_plain": agree,
            },
            indent=2,
        )
    )
    print(f"wrote {out}")


def _agreement(out: list, plain: list) -> str:
    if out and isinstance(out[0], str):
        return f"{sum(a == b for a, b in zip(out, plain)) / len(plain):.0%}"
    diffs = [abs(x - y) for a, b in zip(out, plain) if a is not None for x, y in zip(a, b)]
    return f"{max(diffs, default=0.0):.1e}"


if __name__ == "__main__":
    main()
