"""Stage 1 of SEED: label episodes with a teacher (`seed label`), then warm the analyzer up by SFT (`seed sft`).

Labels: the base policy (no skill) plays training tasks; the teacher writes {"episode_summary", "episode_skill"}
for every episode; only outputs that parse are kept, and the target is the parsed fields re-serialised as compact
JSON (what the analyzer should write, not the teacher's wrapping). SFT as verl's SFT trainer: response-only NLL as
a token mean (`seed.train.sft`, the format warm-up's step), AdamW (0.9, 0.95) with weight decay, linear warm-up
then cosine; one optimizer step per `sft.batch_size` labels; a held-out split; reports
held-out loss, the JSON parse rate and skill presence of greedy generations. With `sft.format_replay` the format
warm-up's demonstrations ride along as a second loss term (multi-task SFT), so the policy keeps its answer format.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from seed.agent import prompt_ids
from seed.errors import RunError
from seed.models.backend import Sampling
from seed.models.batching import token_budget_batches
from seed.models.load import trainable_parameters
from seed.skills.analyzer import analysis_frames, analysis_prompt, parse_analysis
from seed.skills.teachers import Teacher
from seed.storage import read_jsonl
from seed.train.optim import adamw, warmup_cosine
from seed.train.sft import Demonstration, SFTTerm, demo_images, sft_step
from seed.train.warmup import warmup_demonstrations
from seed.types import Episode

if TYPE_CHECKING:  # annotations only
    from seed.train.components import Components

log = logging.getLogger(__name__)

LABEL_SEED_OFFSET = 50_000_000  # label tasks never coincide with RL tasks
NO_SPAN = (0, 0)  # no tokens to weigh apart
LABEL_MIN_SKILL_WORDS = 5  # an external teacher's skill shorter than this is a failed label (official API path)


def sft_target(analysis, skill_first: bool = False) -> str:
    """The analyzer's training target: the parsed analysis as compact JSON (step skills only when present), in the
    order the analysis prompt asks for."""
    fields = [("episode_summary", analysis.summary), ("episode_skill", analysis.skill)]
    out = dict(fields[::-1] if skill_first else fields)
    if analysis.step_skills:
        out["step_skills"] = {str(k): v for k, v in analysis.step_skills.items()}
    return json.dumps(out, ensure_ascii=False)


def target_ids(tok, response: str, weigh_skill: bool) -> tuple[list[int], tuple[int, int]]:
    """A label's target ids (the end-of-turn token last) and the token span of its episode_skill value (`NO_SPAN`
    unless `weigh_skill`, or where the target has no skill string)."""
    if not weigh_skill:
        return tok.encode(response, add_special_tokens=False) + [tok.eos_token_id], NO_SPAN
    enc = tok(response, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"]) + [tok.eos_token_id]
    chars = skill_chars(response)
    if chars is None:
        return ids, NO_SPAN
    inside = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if a < chars[1] and b > chars[0]]
    return ids, (inside[0], inside[-1] + 1)


def skill_chars(response: str) -> tuple[int, int] | None:
    """[start, end) of the episode_skill string's characters in a JSON target, None where it has none."""
    try:
        skill = json.loads(response).get("episode_skill")
    except (ValueError, AttributeError):
        return None
    if not isinstance(skill, str) or not skill:
        return None
    key = response.find('"episode_skill"')
    start = response.find(json.dumps(skill, ensure_ascii=False)[1:-1], key)
    return None if key < 0 or start < 0 else (start, start + len(json.dumps(skill, ensure_ascii=False)) - 2)


def make_teacher(components: Components) -> Teacher:
    cfg = components.cfg.label
    if cfg.teacher == "oracle":
        from seed.skills.teachers import OracleTeacher

        return OracleTeacher(components.oracle_env_factory("train"), components.cfg.distill.step_skills)
    from seed.skills.openai_teacher import OpenAITeacher, resolve_api_key

    o = cfg.openai
    return OpenAITeacher(
        o.base_url,
        o.model,
        api_key=resolve_api_key(o.api_key, o.api_key_file, o.api_key_env),
        cache_dir=Path(components.cfg.run_dir) / "teacher_cache",
        max_concurrency=o.max_concurrency,
        retries=o.retries,
        backoff=o.backoff,
        timeout=o.timeout,
        deadline=o.deadline,
        step_skills=components.cfg.distill.step_skills,
    )


def label_episodes(teacher: Teacher, episodes: list[Episode]) -> list[str | None]:
    """The teacher's raw answer per episode; None where labelling failed (an env fault in the oracle's replay,
    an endpoint that gave up): that episode is skipped, not the stage."""
    return teacher.label_many(episodes)


def label_stage(components: Components, progress: Callable[[int], None] | None = None) -> Path:
    """Write labels.jsonl in the run directory; resumable (tasks already labelled are skipped)."""
    cfg = components.cfg
    out = Path(cfg.run_dir) / "labels.jsonl"
    done = {r["task_seed"] for r in read_jsonl(out) if "task_seed" in r}
    todo = [LABEL_SEED_OFFSET + i for i in range(cfg.label.tasks) if LABEL_SEED_OFFSET + i not in done]
    if not todo:
        return out
    teacher = make_teacher(components)
    collector = components.collector("train")
    sampling = components.rollout_sampling(cfg.label.temperature)
    chunk = max(1, cfg.rollout.generation_batch_size // cfg.label.group_size)

    def count(text: str) -> int:
        return len(components.tokenizer.encode(text, add_special_tokens=False))

    tried = failed = 0
    for i in range(0, len(todo), chunk):
        seeds = todo[i : i + chunk]
        episodes = [
            e
            for e in collector.collect(components.policy, seeds, cfg.label.group_size, sampling, id_prefix="label-")
            if e.error is None and e.steps
        ]
        labels = label_episodes(teacher, episodes)
        tried, failed = tried + len(episodes), failed + sum(raw is None for raw in labels)
        with out.open("a") as f:
            for e, raw in zip(episodes, labels):
                if raw is None:
                    continue
                analysis = parse_analysis(raw, LABEL_MIN_SKILL_WORDS, cfg.distill.step_skills, len(e.steps))
                prompt, cut = analysis_prompt(
                    e, cfg.distill.step_skills, cfg.distill.analyzer_max_prompt_tokens, count, cfg.distill.skill_first
                )
                frames = save_frames(analysis_frames(e, cut), out.parent / LABEL_FRAMES / e.episode_id)
                f.write(
                    json.dumps(
                        {
                            "task_seed": e.task_seed,
                            "episode_id": e.episode_id,
                            "task_type": e.task_type,
                            "outcome": "success" if e.won else "failure",
                            "prompt": prompt,
                            "raw": raw,
                            "response": sft_target(analysis, cfg.distill.skill_first) if analysis.skill else raw,
                            "parsed": analysis.skill is not None,
                            **({"frames": frames} if frames else {}),
                        }
                    )
                    + "\n"
                )
        if progress:
            progress(len(seeds))
        if tried >= 16 and failed / tried > cfg.label.max_failed_share:  # clearly broken: stop early
            break
    collector.close()
    if tried and failed / tried > cfg.label.max_failed_share:
        raise RunError(
            f"labelling failed for {failed} of {tried} episodes, more than label.max_failed_share = "
            f"{cfg.label.max_failed_share} (see the warnings above); the labels so far are kept in "
            f"{out}, and re-running resumes"
        )
    if failed:
        log.warning("labelling: %d of %d episodes failed and were skipped", failed, tried)
    return out


LABEL_FRAMES = "label_frames"  # beside labels.jsonl: the frames of visual episodes' analysis prompts, as PNGs


def save_frames(frames: list, folder: Path) -> list[str]:
    """The frames as PNG files in `folder`; their paths relative to the run directory (labels.jsonl's folder)."""
    if not frames:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    for k, frame in enumerate(frames):
        frame.save(folder / f"{k:03d}.png")
    return [f"{LABEL_FRAMES}/{folder.name}/{k:03d}.png" for k in range(len(frames))]


def load_frames(run_dir: Path, row: dict) -> tuple:
    """A label row's frames (none for a text env)."""
    from PIL import Image

    frames = []
    for rel in row.get("frames", []):
        with Image.open(run_dir / rel) as image:
            frames.append(image.convert("RGB"))
    return tuple(frames)


def _is_holdout(episode_id: str, share: float) -> bool:
    return _id_hash(episode_id) / 0xFFFFFFFF < share


def balanced(rows: list[dict], failures_per_success: float) -> set[str]:
    """The episode ids to train on: every success, and at most `failures_per_success` failures per success (all when
    0), picked by a hash of the id. A policy that wins a few episodes in ten gives the analyzer a few workflows to
    learn from, and it learns to write warnings only."""
    ids = [r["episode_id"] for r in rows]
    if not failures_per_success:
        return set(ids)
    wins = [r["episode_id"] for r in rows if r.get("outcome") == "success"]
    losses = sorted(
        (r["episode_id"] for r in rows if r.get("outcome") != "success"), key=lambda i: _id_hash(f"balance/{i}")
    )  # not the hold-out's order
    return set(wins) | set(losses[: round(failures_per_success * max(1, len(wins)))])


def _id_hash(episode_id: str) -> int:
    return int(hashlib.sha256(episode_id.encode()).hexdigest()[:8], 16)


def format_replay(components: Components) -> list[Demonstration]:
    """The format warm-up's demonstrations (the same ones: same seed and settings), to replay during analyzer SFT."""
    return warmup_demonstrations(components)


def sft_stage(components: Components, labels: Path, progress_factory: Callable[..., Any] | None = None) -> dict:
    """Analyzer SFT on the labels that parsed; returns held-out loss, parse rate and skill presence."""
    cfg, policy, tok = components.cfg, components.policy, components.tokenizer
    s = cfg.sft
    labels_path = Path(labels)
    rows = read_jsonl(labels)
    rows = [
        r for r in rows if r.get("parsed") and isinstance(r.get("prompt"), str) and isinstance(r.get("response"), str)
    ]
    if not rows:
        raise ValueError(f"{labels}: no label parsed; nothing to train the analyzer on")
    labels = []
    for r in rows:
        frames = load_frames(labels_path.parent, r)
        ids, span = target_ids(tok, r["response"], s.skill_weight != 1)
        labels.append(Demonstration(prompt_ids(tok, r["prompt"], len(frames)), ids, span, frames))
    held_out = [_is_holdout(r["episode_id"], s.holdout) for r in rows]
    kept = balanced(rows, s.failures_per_success)
    train_rows = [(d, r) for d, r, h in zip(labels, rows, held_out) if not h and r["episode_id"] in kept]
    train = [d for d, _ in train_rows]
    held = [d for d, h in zip(labels, held_out) if h] or train[-1:]
    replay = format_replay(components) if s.format_replay else []
    params = list(trainable_parameters(policy.model).values())
    opt = adamw(policy.model, lr=s.lr, weight_decay=s.weight_decay, betas=(s.adam_beta1, s.adam_beta2))
    total_steps = s.epochs * -(-len(train) // s.batch_size)
    schedule = warmup_cosine(opt, total_steps, s.warmup_ratio)
    rng = random.Random(cfg.seed)
    bar = progress_factory(total=total_steps, desc="analyzer sft") if progress_factory else None
    budget = s.token_budget or cfg.algo.token_budget
    policy.release_generation_copy()
    policy.model.train()
    skipped = 0
    for _ in range(s.epochs):
        rng.shuffle(train)
        batches = [train[i : i + s.batch_size] for i in range(0, len(train), s.batch_size)]
        for k, batch in enumerate(batches):
            # each replayed demonstration once per epoch, as a second term: L_analysis + L_format
            replayed = replay[k :: len(batches)]
            terms = [SFTTerm(batch, s.skill_weight), SFTTerm(replayed, cfg.warmup.action_weight)]
            loss_value, stepped = sft_step(policy, opt, params, [t for t in terms if t.demonstrations], budget)
            skipped += not stepped
            schedule.step()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss_value:.3f}")
    if bar is not None:
        bar.close()
    with torch.no_grad():
        total, count = 0.0, 0
        for micro in token_budget_batches([len(d.prompt) + len(d.response) for d in held], budget):
            logp, mask, _ = policy.forward_logps(
                [held[j].prompt for j in micro], [held[j].response for j in micro], images=demo_images(held, micro)
            )
            total += -(logp * mask).sum().item()
            count += int(mask.sum().item())
    shown = held[: s.eval_generations]
    gens = policy.generate(
        [d.prompt for d in shown],
        Sampling(greedy=True, max_new_tokens=s.max_new_tokens, stop=()),
        images=demo_images(shown, range(len(shown))),
    )
    parsed = [parse_analysis(g.text) for g in gens]
    return {
        "sft/train_examples": len(train),
        "sft/train_successes": sum(row.get("outcome") == "success" for _, row in train_rows),
        "sft/replay_examples": len(replay),
        "sft/heldout_examples": len(held),
        "sft/heldout_loss": total / max(1, count),
        "sft/parse_rate": sum(a.parsed for a in parsed) / max(1, len(parsed)),
        "sft/skill_presence": sum(a.skill is not None for a in parsed) / max(1, len(parsed)),
        "sft/skipped_steps": skipped,
    }
