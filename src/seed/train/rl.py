"""One RL update, top to bottom as in the paper's algorithm:

    rollout -> [analyse episodes -> skills -> re-score sampled tokens with the skill] -> advantages (registry)
    -> per mini-batch: L = L_PPO + kl_coef * KL(pi || pi_ref) - entropy_coef * H [+ lambda * L_OPD]
    -> AdamW step (grad clip)

(the bracketed parts run when `distill.kind` is not "none")

and the loop around it: fixed task seeds per update (so a resumed run never repeats one), episode files,
metrics, atomic checkpoints.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from seed.agent import action_token_mask, prompt_images
from seed.algos import (
    ADVANTAGES,
    AdvantageParams,
    DistillParams,
    LossStats,
    ObjectiveParams,
    PolicyLossParams,
    StepScores,
    TokenTensors,
    cap_invalid,
    rl_objective,
)
from seed.algos.distill import raised_by_skill
from seed.algos.signal import SampleShift, agreement_auc, signal_metrics, signal_sums
from seed.config import redacted
from seed.envs.base import action_tags
from seed.errors import NonFiniteError, RunError
from seed.models.batching import prompt_sharing_batches
from seed.models.load import trainable_parameters
from seed.storage import read_jsonl, write_jsonl_rows
from seed.train.checkpoint import (
    load_latest_checkpoint,
    remove_stale_temporaries,
    rng_state,
    set_rng_state,
)
from seed.train.metrics import MetricsLogger, phase_peak, rss_mb, trim_heap
from seed.train.parallel import Ranks, SingleProcess
from seed.train.wandb_sink import open_sink
from seed.types import Episode, StepSample

if TYPE_CHECKING:  # annotations only
    from seed.config import Config
    from seed.train.components import Components

log = logging.getLogger(__name__)


@dataclass
class Batch:
    """The step samples an update trains on, with one advantage each (their teacher log-probs, when re-scored,
    are on the samples: `StepSample.teacher_logps`)."""

    samples: list[StepSample]
    advantages: torch.Tensor  # one per sample (broadcast to its tokens)
    won: list[bool] | None = None  # per sample: its episode's outcome (for the teacher-signal metrics)


def task_seeds_for_update(cfg: Config, update: int) -> list[int]:
    """The training tasks of update `update`: a fixed, non-overlapping window of train-split seeds."""
    n = cfg.rollout.tasks_per_update
    return [cfg.seed * 1_000_000 + update * n + i for i in range(n)]


def step_scores(episodes: list[Episode], invalid_penalty: float) -> StepScores:
    """The estimators' view of the episodes: a step sample's score is its episode's outcome minus *this* step's
    invalid-action penalty (the official per-step score); an episode's score subtracts all its penalties."""
    steps = [(i, e, s) for i, e in enumerate(episodes) for s in e.steps]
    outcome = [e.score + invalid_penalty * e.num_invalid for e in episodes]
    return StepScores(
        episode=[i for i, _, _ in steps],
        group=[e.group_id for _, e, _ in steps],
        step_score=[outcome[i] - invalid_penalty * (not s.valid) for i, _, s in steps],
        episode_score=[e.score for e in episodes],
        step_reward=[s.reward for _, _, s in steps],
        anchor=[s.state.observation for _, _, s in steps],
    )


def advantage_params(a) -> AdvantageParams:
    return AdvantageParams(norm=a.norm, over=a.grpo_over, step_weight=a.gigpo_step_weight, gamma=a.gigpo_gamma)


def compute_advantages(episodes: list[Episode], cfg: Config) -> Batch:
    """Per-step advantages (`algo.advantage`, from the ADVANTAGES registry; invalid steps capped at 0 under
    `algo.invalid_advantage=nonpositive`) for every step of the episodes that ran without an env fault; each step
    sample keeps its own (`StepSample.advantage`, written to the episode files)."""
    eps = [e for e in episodes if e.error is None and e.steps]
    if not eps:
        return Batch([], torch.zeros(0))
    adv = ADVANTAGES[cfg.algo.advantage](step_scores(eps, cfg.rollout.invalid_penalty), advantage_params(cfg.algo))
    samples = [s for e in eps for s in e.steps]
    if cfg.algo.invalid_advantage == "nonpositive":
        adv = cap_invalid(adv, [s.valid for s in samples])
    won = [e.won for e in eps for _ in e.steps]
    for s, value in zip(samples, adv.tolist()):
        s.advantage = value
    keep = [i for i, s in enumerate(samples) if s.response_ids]
    return Batch([samples[i] for i in keep], adv[keep], [won[i] for i in keep])


def mini_batch_plan(n: int, size: int, pad: bool, rng: random.Random) -> list[list[int]]:
    """Sample indices, shuffled, in mini-batches of `size`, so the number of optimizer steps follows the batch
    size. With `pad` a short last mini-batch is filled with samples drawn again at random (official), so every
    step sees `size` samples. A batch of at most `size` samples (or size 0) is one step, never padded: padding it
    would count most samples several times."""
    order = list(range(n))
    rng.shuffle(order)
    if size <= 0 or n <= size:
        return [order] if order else []
    missing = -n % size
    if pad and missing:
        order += rng.sample(range(n), missing)  # missing < size < n: no sample is drawn twice
    return [order[i : i + size] for i in range(0, len(order), size)]


def objective_params(cfg: Config) -> ObjectiveParams:
    a, d = cfg.algo, cfg.distill
    return ObjectiveParams(
        policy_loss=a.policy_loss,
        policy=PolicyLossParams(a.clip, a.clip_ratio_c),
        kl_coef=a.kl_coef,
        entropy_coef=a.entropy_coef,
        distill=d.kind,
        distill_coef=d.coef,
        distill_params=DistillParams(beta=d.beta, opid_weight=d.opid_weight),
    )


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
            raise NonFiniteError(
                f"{self.in_a_row} optimizer steps in a row were skipped for a non-finite {why} "
                f"(train.max_skipped_steps = {self.limit}); the weights of the last checkpoint are "
                f"intact: lower algo.lr (now {self.lr:g}) or check the data, then resume"
            )


@dataclass
class _Scores:
    """No-grad log-probs computed once per update, per sample: reference (KL) and, with several mini-batches (or
    for `distill.kind: positive`, whose active tokens are fixed by them), the rollout weights' (the ratio's
    denominator)."""

    ref: list[list[float]] | None
    old: list[list[float]] | None


def policy_update(
    components, optimizer, batch: Batch, dp=None, guard: SkipGuard | None = None, update: int = 0
) -> dict:
    """One PPO epoch over the batch: per mini-batch (`mini_batch_plan`), the objective of its micro-batches
    (token budget), one backward each, one optimizer step.

    With one mini-batch the rollout weights are the weights of the first forward pass, so the old log-probs are
    that pass's values, detached: exact, and no extra forward. With more, they are computed up front, or taken from
    the rollout (`old_logprobs_source`).
    `dp` (seed.dist.fsdp.DataParallel) spreads each mini-batch's micro-batches over data-parallel ranks that all
    hold the whole batch: the loss weights stay those of the whole mini-batch, and gradients are summed.
    """
    cfg, policy, a = components.cfg, components.policy, components.cfg.algo
    samples = batch.samples
    prompts, responses = [s.prompt_ids for s in samples], [s.response_ids for s in samples]
    images = prompt_images([s.state for s in samples])
    plan = mini_batch_plan(
        len(samples), a.mini_batch_size, a.pad_mini_batches, random.Random(cfg.seed * 1_000_003 + update)
    )
    t0 = time.perf_counter()
    reference = components.scoring_reference()
    needs_old = len(plan) > 1 or cfg.distill.kind == "positive"
    from_rollout = needs_old and old_logprobs_source(components, dp) == "rollout"
    if from_rollout:
        old = rollout_old_logprobs(policy, samples, a.token_budget)
    else:
        old = policy.logprobs(prompts, responses, a.token_budget, images) if needs_old else None
    scores = _Scores(ref=reference.logprobs(prompts, responses, a.token_budget, images) if reference else None, old=old)
    del reference
    components.release_reference()  # (model.offload_reference) not held through the steps and the next rollout
    t_scores = time.perf_counter() - t0
    params = objective_params(cfg)
    policy.release_generation_copy()
    policy.model.train()
    total, grad_norms, skipped, trained_tokens = LossStats(), [], 0, 0
    shifts: dict[int, list[float]] = {}  # sample -> delta per token, at its first forward of the update
    for chunk in plan:
        optimizer.zero_grad(set_to_none=True)
        stats, finite = _accumulate_gradients(components, batch, chunk, scores, params, dp, shifts)
        grad_norm = _optimizer_step(policy, optimizer, a.grad_clip, finite, dp, guard)
        if grad_norm is None:
            skipped += 1
            continue
        grad_norms.append(grad_norm)
        total = total + stats
        trained_tokens += sum(len(responses[i]) for i in chunk)  # padding re-draws count again
    n_steps = len(plan) - skipped
    sums = asdict(total)
    if dp is not None:  # every rank ran a share of the micro-batches: add the shares up
        sums = dp.sum_dict(sums)
    out = _update_stats(sums, n_steps, skipped, grad_norms, trained_tokens, cfg.distill.kind != "none", t_scores)
    out["train/old_logprobs_from_rollout"] = float(from_rollout)
    if shifts:
        out.update(teacher_signal(components.tokenizer, batch, shifts, dp))
    return out


def old_logprobs_source(components, dp=None) -> str:
    """`rollout` or `recompute`: where the update takes the PPO ratio's old log-probs from (`algo.old_logprobs`).

    `auto` takes the sampler's log-probs only where they are a recompute's up to fp32 rounding: the trainer decoded
    the rollout itself (no generation workers, no data-parallel replica), with the same fp32 weights it trains (no
    autocast: a bf16 decoding copy runs other kernels on other shapes, and its log-probs then differ by up to a
    quarter on unlikely tokens). Saves one no-grad pass of the policy over the batch per update."""
    cfg = components.cfg
    if cfg.algo.old_logprobs != "auto":
        return cfg.algo.old_logprobs
    decodes_itself = dp is None and components.rollout_backend() is components.policy
    return "rollout" if decodes_itself and components.policy.amp_dtype is None else "recompute"


def rollout_old_logprobs(policy, samples: list[StepSample], token_budget: int) -> list[list[float]]:
    """Each sample's temperature-1 log-probs as the sampler drew its response (same weights as the update's start);
    a sample without them (one per response token) is scored by the policy instead."""
    old = [s.rollout_logps for s in samples]
    missing = [i for i, s in enumerate(samples) if len(s.rollout_logps) != len(s.response_ids)]
    if missing:
        picked = [samples[i] for i in missing]
        scored = policy.logprobs(
            [s.prompt_ids for s in picked],
            [s.response_ids for s in picked],
            token_budget,
            prompt_images([s.state for s in picked]),
        )
        for i, logps in zip(missing, scored):
            old[i] = logps
    return old


def teacher_signal(tokenizer, batch: Batch, shifts: dict[int, list[float]], dp=None) -> dict:
    """The update's teacher-signal metrics (`seed.algos.signal`) from the shifts its forward passes computed.
    Under data parallelism the sums cover every rank; the AUC covers this rank's share of the samples."""
    t0 = time.perf_counter()
    rows = []
    for i, delta in sorted(shifts.items()):
        s = batch.samples[i]
        expert = s.expert_action
        tokens = [tokenizer.decode([t]) for t in s.response_ids]
        rows.append(
            SampleShift(
                delta=delta,
                action=action_token_mask(tokens, action_tags(s.state.env_name)),
                won=bool(batch.won[i]) if batch.won is not None else False,
                advantage=float(batch.advantages[i]),
                agrees=None if expert is None else s.valid and s.action.strip().lower() == expert.strip().lower(),
            )
        )
    sums = signal_sums(rows)
    if dp is not None:
        sums = dp.sum_dict(sums)
    out = signal_metrics(sums, agreement_auc(rows))
    out["time/teacher_signal"] = time.perf_counter() - t0
    return out


def _accumulate_gradients(
    components,
    batch: Batch,
    chunk: list[int],
    scores: _Scores,
    params: ObjectiveParams,
    dp,
    shifts: dict[int, list[float]] | None = None,
) -> tuple[LossStats, bool]:
    """Backward of the objective over one mini-batch's micro-batches; its stats and whether every loss was finite.
    Each skilled sample's per-token shift delta at its first forward goes into `shifts`."""
    policy, a = components.policy, components.cfg.algo
    samples = batch.samples
    distilling = params.distill != "none"
    tokens = sum(len(samples[i].response_ids) for i in chunk)
    active = _opd_active_tokens(samples, chunk, scores, params.distill)
    micros = prompt_sharing_batches(
        [samples[i].prompt_ids for i in chunk], [samples[i].response_ids for i in chunk], a.token_budget
    )
    stats, finite = LossStats(), True
    for micro, scale in dp.share(micros) if dp is not None else [(m, 1.0) for m in micros]:
        idx = [chunk[j] for j in micro]
        t = _token_tensors(policy, batch, idx, scores, with_entropy=params.entropy_coef > 0, distilling=distilling)
        loss, s = rl_objective(t, params, tokens, active)
        if distilling and shifts is not None:
            _record_shifts(shifts, idx, samples, t)
        if not torch.isfinite(loss):
            finite = False
            if dp is None:
                break  # data-parallel ranks still run their backward: the collectives must match
        trim_heap()  # the forward's freed temporaries go back to the OS before the backward allocates gradients
        (loss * scale).backward()
        if scale:  # scale 0: a padding micro-batch keeps the ranks' collectives in step and adds nothing
            stats = stats + s
    return stats, finite


def _opd_active_tokens(samples: list[StepSample], chunk: list[int], scores: _Scores, kind: str) -> int:
    """The mini-batch's OPD-active token count, L_OPD's denominator: the response tokens of skilled samples, or
    for `positive` those the skill raised over the rollout weights (`raised_by_skill`)."""
    skilled = [i for i in chunk if kind != "none" and samples[i].teacher_logps is not None]
    if kind != "positive":
        return sum(len(samples[i].response_ids) for i in skilled)
    return sum(
        int(raised_by_skill(torch.tensor(samples[i].teacher_logps), torch.tensor(scores.old[i])).sum()) for i in skilled
    )


def _record_shifts(shifts: dict[int, list[float]], idx: list[int], samples: list[StepSample], t: TokenTensors) -> None:
    delta = (t.teacher_logp - t.logp.detach().float()).cpu()
    for row, i in enumerate(idx):
        if samples[i].teacher_logps is not None and i not in shifts:
            shifts[i] = delta[row, : len(samples[i].response_ids)].tolist()


def _token_tensors(
    policy, batch: Batch, idx: list[int], scores: _Scores, with_entropy: bool, distilling: bool
) -> TokenTensors:
    """One micro-batch's per-token tensors: the student forward (with grad) and the stored scores, padded alike."""
    samples = [batch.samples[i] for i in idx]
    logp, mask, entropy = policy.forward_logps(
        [s.prompt_ids for s in samples],
        [s.response_ids for s in samples],
        with_entropy=with_entropy,
        images=prompt_images([s.state for s in samples]),
    )
    teacher, skill_mask = None, None
    if distilling:
        has_skill = torch.tensor([s.teacher_logps is not None for s in samples], dtype=mask.dtype)
        skill_mask = mask * has_skill[:, None].to(mask.device)
        teacher = _pad([s.teacher_logps or [] for s in samples], logp)
    return TokenTensors(
        logp=logp,
        mask=mask,
        entropy=entropy,
        advantage=batch.advantages[idx].to(logp.device),
        old_logp=_pad([scores.old[i] for i in idx], logp) if scores.old is not None else logp.detach(),
        ref_logp=_pad([scores.ref[i] for i in idx], logp) if scores.ref is not None else None,
        teacher_logp=teacher,
        skill_mask=skill_mask,
    )


def _optimizer_step(policy, optimizer, grad_clip: float, finite: bool, dp, guard: SkipGuard | None) -> float | None:
    """Clip and step; the gradient norm, or None when the step was skipped for a NaN/inf loss or gradient norm
    (the weights stay finite, and every data-parallel rank skips together)."""
    params = list(trainable_parameters(policy.model).values())
    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, grad_clip)) if finite else math.nan
    ok = finite and math.isfinite(grad_norm)
    if dp is not None:
        ok = dp.all_true(ok)
    if guard is not None:
        guard.record(not ok, "loss" if not finite else "gradient norm")
    if not ok:
        optimizer.zero_grad(set_to_none=True)
        return None
    trim_heap()  # the backward's freed blocks go back to the OS before the step allocates
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)  # spent: rollout and analysis get their memory
    return grad_norm


def _update_stats(
    sums: dict,
    n_steps: int,
    skipped: int,
    grad_norms: list[float],
    trained_tokens: int,
    distilling: bool,
    t_scores: float,
) -> dict:
    per_step = {k: v / max(1, n_steps) for k, v in sums.items()}
    stats = {
        f"train/{k}": per_step[k]
        for k in ("loss", "pg_loss", "kl", "entropy", "clip_frac", "dual_clip_frac", "approx_kl")
    }
    if distilling:
        active = max(1.0, sums["active_tokens"])
        stats.update(
            {
                "distill/delta_mean": sums["delta_sum"] / active,
                "distill/gate_mean": sums["gate_sum"] / active,
                "distill/opd_loss": per_step["opd_loss"],
                "distill/active_token_share": sums["active_tokens"] / max(1, trained_tokens),
            }
        )
    stats.update(
        {
            "train/grad_norm": sum(grad_norms) / max(1, len(grad_norms)),
            "train/skipped_steps": skipped,
            "train/optimizer_steps": n_steps,
            "time/reference": t_scores,
        }
    )
    return stats


def _pad(rows: list[list[float]], like: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(like, dtype=torch.float32)
    for b, r in enumerate(rows):
        out[b, : len(r)] = torch.tensor(r, dtype=torch.float32)
    return out


def _check_some_episode_ran(episodes: list[Episode], update: int) -> None:
    """A whole update of faulted episodes means the env (or its config) is broken: stop instead of training on
    nothing."""
    faulted = [e for e in episodes if e.error is not None]
    if episodes and len(faulted) == len(episodes):
        raise RunError(
            f"update {update}: all {len(episodes)} episodes faulted in the env (first: {faulted[0].error}); "
            f"check env.name / env.kwargs, or the env itself"
        )


def rollout_stats(episodes: list[Episode]) -> dict:
    ok = [e for e in episodes if e.error is None]
    steps = [s for e in ok for s in e.steps]
    return {
        "rollout/success": sum(e.won for e in ok) / max(1, len(ok)),
        "rollout/score": sum(e.score for e in ok) / max(1, len(ok)),
        "rollout/episode_length": len(steps) / max(1, len(ok)),
        "rollout/invalid_rate": sum(not s.valid for s in steps) / max(1, len(steps)),
        # invalid steps the update pushes up: one such step can break the answer format (algo.invalid_advantage)
        "rollout/invalid_reinforced": sum(not s.valid and (s.advantage or 0.0) > 0 for s in steps),
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


def _resume(components: Components, ranks, run_dir: Path) -> tuple[torch.optim.Optimizer, int]:
    """The optimizer and the first update to run, from the newest verified checkpoint (fresh at 0 without one).
    The checkpoint's tensors are copied into the model and the optimizer and then dropped with this frame: a
    copy of the weights (and, resuming mid-run, of AdamW's moments) held through the updates would add their
    size to every phase's memory."""
    if ranks.is_main:
        remove_stale_temporaries(run_dir)
    ckpt, state = load_latest_checkpoint(run_dir, set_aside=ranks.is_main)
    optimizer = ranks.setup(components, state)
    if state is None:
        return optimizer, 0
    set_rng_state(state["rng"])
    components.sampling_generator.set_state(state["generator"])
    if state.get("skills") and ranks.is_main:  # the skill stream as the checkpoint saw it
        (run_dir / "skills.jsonl").write_text(state["skills"])
    log.info("resumed from %s (update %d)", ckpt, state["update"])
    return optimizer, int(state["update"])


def train(
    components: Components,
    progress_factory: Callable[..., Any] | None = None,
    ranks: Ranks | None = None,
    evaluate_every: Callable[[int], dict] | None = None,
) -> int:
    """Run updates until `train.updates`; resumes from the run directory's newest verified checkpoint. Returns
    updates done. Each update: rank 0 collects (rollout, advantages, [analysis, re-score]), every rank trains on
    the whole batch (its share of each mini-batch), rank 0 records; then a checkpoint when due.
    `evaluate_every(update)` (rank 0) runs after every `eval.every`-th update and returns metrics."""
    cfg = components.cfg
    ranks = ranks or SingleProcess()
    run_dir = Path(cfg.run_dir)
    optimizer, start = _resume(components, ranks, run_dir)
    if start >= cfg.train.updates:
        return start
    main = _MainRank(components, start, progress_factory) if ranks.is_main else None
    guard = SkipGuard(cfg.train.max_skipped_steps, cfg.algo.lr)
    for update in range(start, cfg.train.updates):
        t0 = time.perf_counter()
        collected = main.collect(update) if main else None
        batch = ranks.share(collected.batch if main else None)  # every rank holds the whole batch
        t1 = time.perf_counter()
        trained = {}
        if batch.samples:
            with phase_peak(trained, "update"):
                trained.update(policy_update(components, optimizer, batch, dp=ranks.dp, guard=guard, update=update))
            ranks.after_update(components)
            if main and main.distill:
                main.distill.after_update()
        done = update + 1
        stats = main.summarise(collected, trained, t0, t1) if main else {}
        del collected, batch
        trim_heap()  # this update's tensors are gone: their pages go back to the OS, so RSS stays flat
        if main:
            main.record(done, stats, evaluate_every)
        if done % cfg.train.checkpoint_every == 0 or done == cfg.train.updates:  # every rank takes part
            _checkpoint(components, ranks, optimizer, run_dir, done)
    if main:
        main.close()
    return cfg.train.updates


@dataclass
class _Collected:
    """One update's data on rank 0: its episodes, the batch they make, and the metrics of collecting it."""

    episodes: list[Episode]
    batch: Batch
    stats: dict


class _MainRank:
    """What only rank 0 does in `train`: roll out, analyse and re-score (SEED), write the episodes, metrics and
    skills, and show progress."""

    def __init__(self, components, start: int, progress_factory=None):
        cfg = components.cfg
        self.components, self.cfg, self.run_dir = components, cfg, Path(cfg.run_dir)
        for name in ("metrics.jsonl", "skills.jsonl"):  # rows of updates the checkpoint does not hold are redone
            _drop_rows_after(self.run_dir / name, start)
        self.metrics = MetricsLogger(self.run_dir, cfg.logging.tensorboard, open_sink(cfg))
        self.distill = None
        if cfg.distill.kind != "none":
            from seed.train.distill import DistillStage

            self.distill = DistillStage(components)
        self.collector = components.collector("train")
        self.bar = progress_factory(total=cfg.train.updates, initial=start, desc="train") if progress_factory else None

    def collect(self, update: int) -> _Collected:
        cfg, t0, stats = self.cfg, time.perf_counter(), {}
        with phase_peak(stats, "rollout"):
            episodes = self.collector.collect(
                self.components.rollout_backend(),
                task_seeds_for_update(cfg, update),
                cfg.rollout.group_size,
                self.components.rollout_sampling(),
                id_prefix=f"u{update}-",
            )
        stats["time/rollout"] = time.perf_counter() - t0
        _check_some_episode_ran(episodes, update + 1)
        batch = compute_advantages(episodes, cfg)
        with phase_peak(stats, "distill"):  # analysis, re-score
            stats.update(self.distill.run(update + 1, episodes, batch.samples) if self.distill else {})
        write_episodes(self.run_dir, update, episodes)
        self.metrics.log_episodes(update + 1, episodes)
        return _Collected(episodes, batch, stats)

    @staticmethod
    def summarise(collected: _Collected, trained: dict, t0: float, t1: float) -> dict:
        """The update's metrics row: collecting, training (`trained`), the rollouts, and the times since the update
        began (`t0`) and since its training began (`t1`)."""
        stats = {**collected.stats, **trained, **rollout_stats(collected.episodes)}
        samples = collected.batch.samples
        stats.update(
            {
                "time/update": time.perf_counter() - t1,
                "time/total": time.perf_counter() - t0,
                "train/samples": len(samples),
                "train/tokens": sum(len(s.response_ids) for s in samples),
            }
        )
        return stats

    def record(self, done: int, stats: dict, evaluate_every) -> None:
        """The row of update `done`, with the periodic evaluation's metrics where due and the RSS now."""
        if evaluate_every is not None and self.cfg.eval.every and done % self.cfg.eval.every == 0:
            stats.update(evaluate_every(done))
        stats["memory/rss_mb"] = rss_mb()
        self.metrics.log(done, stats)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(
                success=f"{stats['rollout/success']:.2f}", invalid=f"{stats['rollout/invalid_rate']:.2f}"
            )

    def close(self) -> None:
        self.collector.close()
        self.metrics.close()
        if self.bar is not None:
            self.bar.close()


def _checkpoint(components: Components, ranks: Ranks, optimizer, run_dir: Path, done: int) -> None:
    """Weights, optimizer, RNG states, the skill stream and the config after update `done` (every rank writes its
    part)."""
    cfg = components.cfg
    meta = {
        "rng": rng_state(),
        "generator": components.sampling_generator.get_state(),
        "update": done,
        "config": redacted(cfg.to_dict()),
        "skills": _read_text(run_dir / "skills.jsonl"),
    }
    with phase_peak({}, "checkpoint"):
        ranks.save_checkpoint(components, optimizer, run_dir, done, meta, cfg.train.keep_checkpoints)
