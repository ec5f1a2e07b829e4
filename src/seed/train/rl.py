"""One RL update, top to bottom as in the paper's algorithm:

    rollout -> [analyse episodes -> skills -> re-score sampled tokens with the skill] -> advantages
    -> PPO-clip + beta * KL(pi || pi_ref) - c * entropy [+ lambda * L_OPD] -> AdamW (grad clip)

(the bracketed parts run when `distill.kind` is not "none")

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

from seed.algos import OPD_KINDS, gigpo_advantages, grpo_advantages, kl_k3, masked_mean, opd_loss, opid_shaping, \
    ppo_clip_loss
from seed.models.batching import prompt_sharing_batches
from seed.rollout.types import Episode, StepSample
from seed.config import redacted
from seed.errors import NonFiniteError, RunError
from seed.storage import read_jsonl, write_jsonl_rows
from seed.train.checkpoint import (load_latest_checkpoint, remove_stale_temporaries, rng_state, save_checkpoint,
                                   set_rng_state)
from seed.train.metrics import MetricsLogger, rss_mb, trim_heap

log = logging.getLogger(__name__)


@dataclass
class Batch:
    samples: list[StepSample]
    advantages: torch.Tensor  # one per sample (broadcast to its tokens)
    teacher_logps: list[list[float] | None] | None = None  # per sample; None where its episode has no skill


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


class SkipGuard:
    """Counts optimizer steps skipped for a NaN/inf loss or gradient norm, across updates; `limit` in a row stop the
    run (NonFiniteError): by then the learning rate or the data is wrong, and going on trains on nothing."""

    def __init__(self, limit: int, lr: float):
        self.limit, self.lr, self.in_a_row, self.total = limit, lr, 0, 0

    def record(self, skipped: bool, why: str = "") -> None:
        if not skipped:
            self.in_a_row = 0
            return
        self.in_a_row, self.total = self.in_a_row + 1, self.total + 1
        log.warning("optimizer step skipped (%s); %d in a row", why, self.in_a_row)
        if self.in_a_row >= self.limit:
            raise NonFiniteError(f"{self.in_a_row} optimizer steps in a row were skipped for a non-finite {why} "
                                 f"(train.max_skipped_steps = {self.limit}); the weights of the last checkpoint are "
                                 f"intact: lower algo.lr (now {self.lr:g}) or check the data, then resume")


def policy_update(components, optimizer, batch: Batch, dp=None, guard: SkipGuard | None = None) -> dict:
    """One PPO epoch over the batch in `algo.mini_batches` optimizer steps; micro-batches by token budget.

    With one mini-batch the rollout weights are the weights of the first forward pass, so the old log-probs
    are that pass's values, detached: exact, and no extra forward. With more, they are computed up front.

    `dp` (seed.dist.fsdp.DataParallel) spreads each mini-batch's micro-batches over data-parallel ranks that all
    hold the whole batch: the loss weights stay those of the whole mini-batch, and gradients are summed.
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
    n_steps = len([c for c in chunks if c])
    d = cfg.distill
    teacher = batch.teacher_logps
    opd_sums = {"delta_mean": 0.0, "gate_mean": 0.0, "active_tokens": 0.0, "opd_loss": 0.0}
    for chunk in chunks:
        if not chunk:
            continue
        total_tokens = sum(len(responses[i]) for i in chunk)
        total_active = sum(len(responses[i]) for i in chunk if teacher is not None and teacher[i] is not None)
        optimizer.zero_grad(set_to_none=True)
        finite = True
        micros = prompt_sharing_batches([prompts[i] for i in chunk], [responses[i] for i in chunk], a.token_budget)
        for micro, scale in (dp.share(micros) if dp is not None else [(m, 1.0) for m in micros]):
            idx = [chunk[j] for j in micro]
            logp, mask, ent = policy.forward_logps([prompts[i] for i in idx], [responses[i] for i in idx],
                                                   with_entropy=a.entropy_coef > 0)
            old = _pad([old_logps[i] for i in idx], logp) if old_logps is not None else logp.detach()
            adv = batch.advantages[idx].to(logp.device)
            opd_term, opd_weight, o_stats = None, 0.0, None
            if teacher is not None and d.kind != "none":
                has_skill = torch.tensor([teacher[i] is not None for i in idx], dtype=mask.dtype)
                opd_mask = mask * has_skill[:, None].to(mask.device)
                t_lp = _pad([teacher[i] or [] for i in idx], logp)
                if d.kind == "opid":  # OPID: the shift shapes the advantage instead of adding a loss
                    adv = opid_shaping(adv, (t_lp - logp).detach() * opd_mask, d.opid_weight)
                elif d.kind in OPD_KINDS and opd_mask.sum() > 0:
                    opd_term, o_stats = opd_loss(logp, t_lp, opd_mask, kind=d.kind, beta=d.beta, old_logp=old)
                    opd_weight = o_stats["active_tokens"] / max(1, total_active)  # token-mean over active tokens
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
                if dp is None:
                    break  # data-parallel ranks still run their backward: the collectives must match
            total = loss * weight + (d.coef * opd_term * opd_weight if opd_term is not None else 0.0)
            (total * scale).backward()
            if scale == 0:  # a padding micro-batch: keeps the ranks' collectives in step, adds nothing
                continue
            share = weight / n_steps
            for k, v in (("loss", loss), ("pg_loss", pg), ("kl", kl), ("entropy", entropy)):
                sums[k] += v.item() * share
            sums["clip_frac"] += pg_stats["clip_frac"] * share
            if o_stats is not None:
                for k in ("delta_mean", "gate_mean"):
                    opd_sums[k] += o_stats[k] * o_stats["active_tokens"]
                opd_sums["active_tokens"] += o_stats["active_tokens"]
                opd_sums["opd_loss"] += opd_term.item() * opd_weight / n_steps
        params = [p for p in policy.model.parameters() if p.requires_grad]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, a.grad_clip)) if finite else math.nan
        ok = finite and math.isfinite(grad_norm)
        if dp is not None:
            ok = dp.all_true(ok)
        if guard is not None:
            guard.record(not ok, "loss" if not finite else "gradient norm")
        if not ok:  # NaN/inf loss or gradient norm: this step is not taken, and the weights stay finite
            optimizer.zero_grad(set_to_none=True)
            skipped += 1
            continue
        grad_norms.append(grad_norm)
        optimizer.step()
    if dp is not None:  # every rank ran a share of the micro-batches: add the shares up
        sums, opd_sums = dp.sum_dict(sums), dp.sum_dict(opd_sums)
    stats.update({f"train/{k}": v for k, v in sums.items()})
    if teacher is not None:
        n_active = opd_sums["active_tokens"]
        stats.update({"distill/delta_mean": opd_sums["delta_mean"] / max(1.0, n_active),
                      "distill/gate_mean": opd_sums["gate_mean"] / max(1.0, n_active),
                      "distill/opd_loss": opd_sums["opd_loss"],
                      "distill/active_token_share": n_active / max(1, sum(len(r) for r in responses))})
    stats["train/grad_norm"] = sum(grad_norms) / max(1, len(grad_norms))
    stats["train/skipped_steps"] = skipped
    stats["train/optimizer_steps"] = n_steps - skipped
    return stats


def _pad(rows: list[list[float]], like: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(like, dtype=torch.float32)
    for b, r in enumerate(rows):
        out[b, :len(r)] = torch.tensor(r, dtype=torch.float32)
    return out


def make_optimizer(model, cfg) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=cfg.algo.lr, weight_decay=cfg.algo.weight_decay)


def _check_some_episode_ran(episodes: list[Episode], update: int) -> None:
    """A whole update of faulted episodes means the env (or its config) is broken: stop instead of training on
    nothing."""
    faulted = [e for e in episodes if e.error is not None]
    if episodes and len(faulted) == len(episodes):
        raise RunError(f"update {update}: all {len(episodes)} episodes faulted in the env (first: {faulted[0].error}); "
                       f"check env.name / env.kwargs, or the env itself")


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


def write_jsonl(path: Path, episodes: list[Episode]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for e in episodes:
            f.write(json.dumps(e.to_json()) + "\n")


def write_episodes(run_dir: Path, update: int, episodes: list[Episode]) -> None:
    write_jsonl(Path(run_dir) / "episodes" / f"update_{update:05d}.jsonl", episodes)


def _read_text(path: Path) -> str:
    """A JSON-lines file's intact rows, as text."""
    return "".join(json.dumps(r) + "\n" for r in read_jsonl(path))


def _drop_rows_after(path: Path, update: int) -> None:
    """Keep the rows of updates up to `update` (a torn trailing line, from a kill mid-write, goes too)."""
    if path.exists():
        kept = [r for r in read_jsonl(path) if isinstance(r.get("update"), int) and r["update"] <= update]
        write_jsonl_rows(path, kept)


class SingleProcess:
    """The trainer's view of its processes when there is one. `seed.dist.fsdp.FSDPRanks` is the N-process view:
    rank 0 collects, analyses and writes; every rank holds the batch and a shard of the update."""

    is_main = True
    dp = None

    def setup(self, components, state: dict | None) -> torch.optim.Optimizer:
        """Load the checkpoint's weights and return the optimizer (with its state when resuming)."""
        optimizer = make_optimizer(components.policy.model, components.cfg)
        if state is not None:
            components.policy.model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        return optimizer

    def share(self, obj):
        return obj

    def after_update(self, components) -> None:
        pass

    def save_checkpoint(self, components, optimizer, run_dir: Path, update: int, meta: dict, keep: int) -> None:
        save_checkpoint(run_dir, update, {"model": components.policy.model.state_dict(),
                                          "optimizer": optimizer.state_dict(), **meta}, keep=keep)


def train(components, progress_factory=None, ranks=None, evaluate_every=None) -> int:
    """Run updates until `train.updates`; resumes from the run directory's newest verified checkpoint. Returns
    updates done. `evaluate_every(update)` (rank 0) runs after every `eval.every`-th update and returns metrics."""
    cfg = components.cfg
    ranks = ranks or SingleProcess()
    run_dir = Path(cfg.run_dir)
    start = 0
    if ranks.is_main:
        remove_stale_temporaries(run_dir)
    ckpt, state = load_latest_checkpoint(run_dir, set_aside=ranks.is_main)
    optimizer = ranks.setup(components, state)
    if state is not None:
        set_rng_state(state["rng"])
        components.rollout_backend().generator.set_state(state["generator"])
        start = state["update"]
        if state.get("skills") and ranks.is_main:  # the skill stream as the checkpoint saw it
            (run_dir / "skills.jsonl").write_text(state["skills"])
        log.info("resumed from %s (update %d)", ckpt, start)
    if start >= cfg.train.updates:
        return start
    main = ranks.is_main
    if main:
        for name in ("metrics.jsonl", "skills.jsonl"):  # rows of updates the checkpoint does not hold are redone
            _drop_rows_after(run_dir / name, start)
    metrics = MetricsLogger(run_dir) if main else None
    distill = None
    if cfg.distill.kind != "none" and main:
        from seed.train.distill import DistillStage

        distill = DistillStage(components)
    collector = components.collector("train") if main else None
    bar = progress_factory(total=cfg.train.updates, initial=start, desc="train") if progress_factory and main else None
    guard = SkipGuard(cfg.train.max_skipped_steps, cfg.algo.lr)
    for update in range(start, cfg.train.updates):
        t0 = time.perf_counter()
        episodes, batch, stats = [], None, {}
        if main:
            episodes = collector.collect(components.rollout_backend(), task_seeds_for_update(cfg, update),
                                         cfg.rollout.group_size, components.rollout_sampling(),
                                         id_prefix=f"u{update}-")
            stats["time/rollout"] = time.perf_counter() - t0
            _check_some_episode_ran(episodes, update + 1)
            batch = compute_advantages(episodes, cfg)
            stats.update(distill.run(update + 1, episodes, batch) if distill else {})
            write_episodes(run_dir, update, episodes)
        batch = ranks.share(batch)  # every rank holds the whole batch
        t1 = time.perf_counter()
        if batch.samples:
            stats.update(policy_update(components, optimizer, batch, dp=ranks.dp, guard=guard))
            ranks.after_update(components)
            if distill:
                distill.after_update()
        done = update + 1
        if main:
            stats.update(rollout_stats(episodes))
            stats.update({"time/update": time.perf_counter() - t1, "time/total": time.perf_counter() - t0,
                          "train/samples": len(batch.samples),
                          "train/tokens": sum(len(s.response_ids) for s in batch.samples)})
        del episodes, batch
        trim_heap()  # this update's tensors are gone: their pages go back to the OS, so RSS stays flat
        if main and evaluate_every is not None and cfg.eval.every and done % cfg.eval.every == 0:
            stats.update(evaluate_every(done))
        if main:
            stats["memory/rss_mb"] = rss_mb()
            metrics.log(done, stats)
        if done % cfg.train.checkpoint_every == 0 or done == cfg.train.updates:  # every rank takes part
            meta = {"rng": rng_state(), "generator": components.rollout_backend().generator.get_state(),
                    "update": done, "config": redacted(cfg.to_dict()), "skills": _read_text(run_dir / "skills.jsonl")}
            ranks.save_checkpoint(components, optimizer, run_dir, done, meta, cfg.train.keep_checkpoints)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(success=f"{stats['rollout/success']:.2f}", invalid=f"{stats['rollout/invalid_rate']:.2f}")
    if main:
        collector.close()
        metrics.close()
    if bar is not None:
        bar.close()
    return cfg.train.updates
