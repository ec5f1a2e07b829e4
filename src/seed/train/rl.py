"""One RL update, top to bottom as in the paper's algorithm:

    rollout -> advantages -> PPO-clip + beta * KL(pi || pi_ref) - c * entropy -> AdamW (grad clip)

and the loop around it: fixed task seeds per update (so a resumed run never repeats one), episode files,
metrics, atomic checkpoints.
"""
from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from seed.algos import gigpo_advantages, grpo_advantages, kl_k3, masked_mean, ppo_clip_loss
from seed.models.backend import token_budget_batches
from seed.rollout.types import Episode, StepSample
from seed.train.checkpoint import latest_checkpoint, load_checkpoint, rng_state, save_checkpoint, set_rng_state
from seed.train.metrics import MetricsLogger

log = logging.getLogger(__name__)


@dataclass
class Batch:
    samples: list[StepSample]
    advantages: torch.Tensor  # one per sample (broadcast to its tokens)


def task_seeds_for_update(cfg, update: int) -> list[int]:
    """The training tasks of update `update`: a fixed, non-overlapping window of train-split seeds."""
    n = cfg.rollout.tasks_per_update
    return [cfg.seed * 1_000_000 + update * n + i for i in range(n)]


def compute_advantages(episodes: list[Episode], cfg) -> Batch:
    """Per-step advantages for every step of the episodes that ran without an env fault."""
    eps = [e for e in episodes if e.error is None and e.steps]
    if not eps:
        return Batch([], torch.zeros(0))
    scores = torch.tensor([e.score for e in eps])
    groups = [e.group_id for e in eps]
    samples = [s for e in eps for s in e.steps]
    if cfg.algo.advantage == "grpo":
        per_episode = grpo_advantages(scores, groups, norm=cfg.algo.norm)
        adv = torch.cat([per_episode[i].repeat(len(e.steps)) for i, e in enumerate(eps)])
    else:
        step_episode = [i for i, e in enumerate(eps) for _ in e.steps]
        anchors = [s.state.observation for s in samples]
        adv = gigpo_advantages(scores, groups, step_episode, anchors, [s.reward for s in samples],
                               step_weight=cfg.algo.gigpo_step_weight, gamma=cfg.algo.gigpo_gamma, norm=cfg.algo.norm)
    keep = [i for i, s in enumerate(samples) if s.response_ids]
    return Batch([samples[i] for i in keep], adv[keep])


def policy_update(components, optimizer, batch: Batch) -> dict:
    """One PPO epoch over the batch in `algo.mini_batches` optimizer steps; micro-batches by token budget.

    With one mini-batch the rollout weights are the weights of the first forward pass, so the old log-probs
    are that pass's values, detached: exact, and no extra forward. With more, they are computed up front.
    """
    cfg, policy = components.cfg, components.policy
    a = cfg.algo
    samples = batch.samples
    prompts = [s.prompt_ids for s in samples]
    responses = [s.response_ids for s in samples]
    stats: dict[str, float] = {}
    t0 = time.perf_counter()
    ref_logps = components.reference.logprobs(prompts, responses, a.token_budget) if components.reference else None
    old_logps = policy.logprobs(prompts, responses, a.token_budget) if a.mini_batches > 1 else None
    stats["time/reference"] = time.perf_counter() - t0

    order = list(range(len(samples)))
    chunks = [order[i::a.mini_batches] for i in range(a.mini_batches)]
    policy.model.train()
    sums: dict[str, float] = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_frac": 0.0}
    grad_norms, skipped = [], 0
    for chunk in chunks:
        if not chunk:
            continue
        total_tokens = sum(len(responses[i]) for i in chunk)
        optimizer.zero_grad(set_to_none=True)
        finite = True
        for micro in token_budget_batches([len(prompts[i]) + len(responses[i]) for i in chunk], a.token_budget):
            idx = [chunk[j] for j in micro]
            logp, mask, ent = policy.forward_logps([prompts[i] for i in idx], [responses[i] for i in idx],
                                                   with_entropy=a.entropy_coef > 0)
            old = _pad([old_logps[i] for i in idx], logp) if old_logps is not None else logp.detach()
            adv = batch.advantages[idx].to(logp.device)
            pg, pg_stats = ppo_clip_loss(logp, old, adv, mask, clip=a.clip)
            loss = pg
            kl = torch.zeros(())
            if ref_logps is not None:
                kl = masked_mean(kl_k3(logp, _pad([ref_logps[i] for i in idx], logp)), mask)
                loss = loss + a.kl_coef * kl
            entropy = masked_mean(ent, mask) if ent is not None else torch.zeros(())
            loss = loss - a.entropy_coef * entropy
            weight = mask.sum().item() / max(1, total_tokens)  # token-mean over the whole mini-batch
            if not torch.isfinite(loss):
                finite = False
                break
            (loss * weight).backward()
            for k, v in (("loss", loss), ("pg_loss", pg), ("kl", kl), ("entropy", entropy)):
                sums[k] += float(v) * weight / len([c for c in chunks if c])
            sums["clip_frac"] += pg_stats["clip_frac"] * weight / len([c for c in chunks if c])
        if not finite:  # NaN/inf: skip this optimizer step and say so
            optimizer.zero_grad(set_to_none=True)
            skipped += 1
            log.warning("non-finite loss: optimizer step skipped")
            continue
        params = [p for p in policy.model.parameters() if p.requires_grad]
        grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, a.grad_clip)))
        optimizer.step()
    stats.update({f"train/{k}": v for k, v in sums.items()})
    stats["train/grad_norm"] = sum(grad_norms) / max(1, len(grad_norms))
    stats["train/skipped_steps"] = skipped
    return stats


def _pad(rows: list[list[float]], like: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(like, dtype=torch.float32)
    for b, r in enumerate(rows):
        out[b, :len(r)] = torch.tensor(r, dtype=torch.float32)
    return out


def make_optimizer(model, cfg) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=cfg.algo.lr, weight_decay=cfg.algo.weight_decay)


def rollout_stats(episodes: list[Episode]) -> dict:
    ok = [e for e in episodes if e.error is None]
    steps = [s for e in ok for s in e.steps]
    return {
        "rollout/success": sum(e.won for e in ok) / max(1, len(ok)),
        "rollout/score": sum(e.score for e in ok) / max(1, len(ok)),
        "rollout/episode_length": len(steps) / max(1, len(ok)),
        "rollout/invalid_rate": sum(not s.valid for s in steps) / max(1, len(steps)),
        "rollout/response_tokens": sum(len(s.response_ids) for s in steps) / max(1, len(steps)),
        "rollout/prompt_tokens": sum(len(s.prompt_ids) for s in steps) / max(1, len(steps)),
        "rollout/truncated_prompts": sum(s.truncated_prompt for s in steps),
        "rollout/dropped_episodes": len(episodes) - len(ok),
    }


def write_episodes(run_dir: Path, update: int, episodes: list[Episode]) -> None:
    folder = Path(run_dir) / "episodes"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"update_{update:05d}.jsonl").open("w") as f:
        for e in episodes:
            f.write(json.dumps(e.to_json()) + "\n")


def _drop_metrics_after(run_dir: Path, update: int) -> None:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return
    rows = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["update"] <= update]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(r + "\n" for r in rows))
    tmp.replace(path)


def train(components, progress_factory=None) -> int:
    """Run updates until `train.updates`; resumes from the run directory's last checkpoint. Returns updates done."""
    cfg = components.cfg
    run_dir = Path(cfg.run_dir)
    optimizer = make_optimizer(components.policy.model, cfg)
    start = 0
    ckpt = latest_checkpoint(run_dir)
    if ckpt is not None:
        state = load_checkpoint(ckpt)
        components.policy.model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        components.policy.generator.set_state(state["generator"])
        start = state["update"]
        log.info("resumed from %s (update %d)", ckpt, start)
    if start >= cfg.train.updates:
        return start
    _drop_metrics_after(run_dir, start)  # rows of updates that the checkpoint does not hold are redone
    metrics = MetricsLogger(run_dir)
    collector = components.collector("train")
    bar = progress_factory(total=cfg.train.updates, initial=start, desc="train") if progress_factory else None
    for update in range(start, cfg.train.updates):
        t0 = time.perf_counter()
        episodes = collector.collect(components.policy, task_seeds_for_update(cfg, update), cfg.rollout.group_size,
                                     components.rollout_sampling(), id_prefix=f"u{update}-")
        t_rollout = time.perf_counter() - t0
        write_episodes(run_dir, update, episodes)
        batch = compute_advantages(episodes, cfg)
        t1 = time.perf_counter()
        stats = policy_update(components, optimizer, batch) if batch.samples else {}
        t_update = time.perf_counter() - t1
        stats.update(rollout_stats(episodes))
        stats.update({"time/rollout": t_rollout, "time/update": t_update, "time/total": time.perf_counter() - t0,
                      "train/samples": len(batch.samples),
                      "train/tokens": sum(len(s.response_ids) for s in batch.samples)})
        metrics.log(update + 1, stats)
        done = update + 1
        if done % cfg.train.checkpoint_every == 0 or done == cfg.train.updates:
            save_checkpoint(run_dir, done, {
                "model": components.policy.model.state_dict(), "optimizer": optimizer.state_dict(),
                "rng": rng_state(), "generator": components.policy.generator.get_state(), "update": done,
                "config": cfg.to_dict()}, keep=cfg.train.keep_checkpoints)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(success=f"{stats['rollout/success']:.2f}", invalid=f"{stats['rollout/invalid_rate']:.2f}")
        if not math.isfinite(stats.get("train/loss", 0.0)):
            log.warning("update %d: non-finite loss reported", done)
    collector.close()
    metrics.close()
    if bar is not None:
        bar.close()
    return cfg.train.updates
