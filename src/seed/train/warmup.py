"""Optional format warm-up: a short SFT that teaches the <think>…</think><action>…</action> answer format.

The demonstrations walk the *training* split. With `expert_share=0` every action is a uniformly random admissible
one, so the model learns to copy an action into the tags and nothing about which action solves the task. With
`expert_share=p`, a share p of the steps take the env's expert move instead: a weak behaviour-cloning prior
(the usual SFT-then-RL start) that RL then has to sharpen. The thought is either a fixed phrase or
(`thought="observation"`) a restatement of the situation: the first sentence of the observation's last line. The
latter demonstrates "reason about the current situation" without saying which action is good (the action stays
random): RL then only has to tie the action to what the model itself just wrote. Used for models too small to
follow the format from the instruction alone (SmolLM2-135M); off in the paper recipes.

Skill following (`skill_share=q`): a share q of the demonstration episodes carries a skill block that the
demonstrated actions follow: in the oracle's wording, decision rules keyed by the situations the episode meets —
a workflow over its first moves, or corrections toward the moves it takes. A small model otherwise learns the
answer format with no skill block in sight and ignores one later; SEED's teacher is the same model reading the
skill, so its shift is only as informative as the model's reading of it. The moves are drawn as in the plain
demonstrations (mostly random, the expert's at `expert_share`): were they the expert's, they could be read off the
observation and the block ignored; were they all random, a skill block would also erase the plain prompt's
preference for the expert's move wherever no rule names the situation (benchmarks/RESULTS.md, "Teacher signal").
The answer is ~20 tokens of which the action is one, and the format is
learnt in the first epoch: `action_weight` weighs the action's tokens above the rest, so that the demonstrations
keep teaching what decides the move (the skill's rule) once the format is learnt.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from seed.agent import render, situation
from seed.agent.parse import ACTION_TAGS, split_action
from seed.envs.base import action_tags, checked_result
from seed.errors import ConfigError, RunError
from seed.models.batching import token_budget_batches
from seed.models.load import trainable_parameters
from seed.skills.teachers import (
    MAX_CORRECTIONS,
    MAX_WORKFLOW_MOVES,
    avoidance_skill,
    corrections,
    first_per_situation,
    workflow_skill,
)
from seed.train.optim import adamw
from seed.train.sft import Demonstration, SFTTerm, sft_step
from seed.types import StepState

if TYPE_CHECKING:  # annotations only
    from seed.train.components import Components

log = logging.getLogger(__name__)

THOUGHTS = ("I pick an action.", "Let me try this.", "I move now.")


def answer(tok, think: str, action: str, tags: tuple[str, ...] = ACTION_TAGS) -> Demonstration:
    """`<think>…</think><action>…</action>` (or the env's own answer tags) and the end-of-turn token, with the
    action's token span (the pieces are encoded apart, as `seed probe` scores an action, so the span is exact)."""
    tag, text = split_action(action, tags)
    head = tok.encode(f"<think>{think}</think><{tag}>", add_special_tokens=False)
    body = tok.encode(text, add_special_tokens=False)
    tail = tok.encode(f"</{tag}>", add_special_tokens=False) + [tok.eos_token_id]  # ends the turn
    return Demonstration([], head + body + tail, (len(head), len(head) + len(body)))


def demonstrations(
    components,
    episodes: int,
    seed: int = 12345,
    expert_share: float = 0.0,
    thought: str = "fixed",
    skill_share: float = 0.0,
    foreign_share: float = 0.0,
) -> list[Demonstration]:
    """Demonstrations (prompt ids, response ids, action span) from episodes on the train split (random or, at
    `expert_share`, expert actions; at `skill_share`, episodes of random moves under a skill that names them, or
    at `foreign_share` of those, a skill of another room's episode)."""
    cfg, tok = components.cfg, components.tokenizer
    rng = random.Random(seed)
    env = components.env_factory("train")()
    pairs, faults = [], []
    for i in range(episodes):
        try:
            task_seed = 10_000_000 + seed + i
            if skill_share and rng.random() < skill_share:  # no draw at 0: the plain demonstrations stay as they were
                pairs += _skill_demonstration(env, cfg, tok, rng, task_seed, thought, foreign_share, expert_share)
            else:
                pairs += _demonstration(env, cfg, tok, rng, task_seed, expert_share, thought)
        except Exception as exc:  # an env fault loses this demonstration, not the run
            faults.append(f"{type(exc).__name__}: {exc}")
            log.warning("warm-up demonstration %d dropped: %r", i, exc)
    try:
        env.close()
    except Exception as exc:
        log.warning("env close failed: %r", exc)
    if not pairs:
        raise RunError(f"format warm-up: all {episodes} demonstration episodes faulted (first: {faults[0]})")
    return pairs


def _demonstration(
    env, cfg, tok, rng: random.Random, task_seed: int, expert_share: float, thought: str
) -> list[Demonstration]:
    """One demonstration episode's demonstrations; raises if the env misbehaves."""
    obs = checked_result("reset", env.reset(task_seed))
    history: list[tuple[str, str]] = []
    pairs = []
    for step in range(cfg.env.max_steps):
        state = StepState.after(cfg.env.name, obs, history, cfg.env.history_length, step)
        draw = rng.random()
        # a free-text env (no admissible list, e.g. Search-QA) demonstrates its expert's moves
        expert = env.expert_plan() if draw < expert_share or not state.admissible else []
        if not expert and not state.admissible:
            raise ValueError(f"task {task_seed}: no admissible actions and no expert move at step {step}")
        action = expert[0] if expert else rng.choice(state.admissible)
        think = situation(obs.text) if thought == "observation" else rng.choice(THOUGHTS)
        demo = answer(tok, think, action, action_tags(cfg.env.name))
        pairs.append(demo._replace(prompt=render(state, tok), images=tuple(state.images)))
        history.append((obs.text, action))
        obs, _, done, _ = checked_result("step", env.step(action))
        if done:
            break
    return pairs


def _skill_demonstration(
    env,
    cfg,
    tok,
    rng: random.Random,
    task_seed: int,
    thought: str,
    foreign_share: float = 0.0,
    expert_share: float = 0.0,
) -> list[Demonstration]:
    """One episode of random moves whose every prompt carries a skill, in the oracle's wording, with decision rules
    for some situations: a workflow naming the first moves of an episode, or an avoidance rule correcting a few of
    them (`MAX_CORRECTIONS`). Where a rule names the situation, reading the skill is the only way to the
    demonstrated move (an expert move could be read off the observation instead, and the block be ignored); where
    none does, the move is drawn as in a plain demonstration (the expert's at `expert_share`, else random), so that a
    skill block changes the move only where a rule names the situation. At `foreign_share` the skill was written
    for another room's episode, so most states meet no rule of it. The moves are a function of the situation, so
    that no two rules contradict."""
    foreign = None
    if foreign_share and rng.random() < foreign_share:
        states, moves, task = _random_walk(env, cfg, rng, task_seed + FOREIGN_SEED_OFFSET, {})
        foreign = _skill_naming(task, [situation(st.observation) for st in states], moves, states[0].admissible, rng)
    states, moves, task = _random_walk(env, cfg, rng, task_seed, dict(foreign[1]) if foreign else {}, expert_share)
    skill, _ = foreign or _skill_naming(
        task, [situation(st.observation) for st in states], moves, states[0].admissible, rng
    )
    pairs = []
    for step, (state, action) in enumerate(zip(states, moves)):
        think = situation(state.observation) if thought == "observation" else THOUGHTS[step % len(THOUGHTS)]
        demo = answer(tok, think, action, action_tags(cfg.env.name))
        pairs.append(demo._replace(prompt=render(state, tok, skill=skill), images=tuple(state.images)))
    return pairs


FOREIGN_SEED_OFFSET = 7_919  # the room a foreign skill was written for


def _random_walk(
    env, cfg, rng: random.Random, task_seed: int, policy: dict[str, str], expert_share: float = 0.0
) -> tuple[list[StepState], list[str], str]:
    """One move per situation (`policy`, pre-filled with the moves some rules bind; a new situation's move is the
    expert's at `expert_share`, else random): the states met, the moves taken, and the task."""
    obs = checked_result("reset", env.reset(task_seed))
    states, moves = [], []
    history: list[tuple[str, str]] = []
    for step in range(cfg.env.max_steps):
        state = StepState.after(cfg.env.name, obs, history, cfg.env.history_length, step)
        key = situation(obs.text)
        if key not in policy:
            expert = env.expert_plan() if rng.random() < expert_share else []
            policy[key] = expert[0] if expert else rng.choice(state.admissible)
        action = policy[key]
        if action not in state.admissible:
            break
        states.append(state)
        moves.append(action)
        history.append((obs.text, action))
        before = obs.text
        obs, _, done, _ = checked_result("step", env.step(action))
        if done or obs.text == before:  # a move that changed nothing would repeat forever under its rule
            break
    return states, moves, obs.task


def _skill_naming(
    task: str, situations: list[str], moves: list[str], admissible: list[str], rng: random.Random
) -> tuple[str, dict[str, str]]:
    """A workflow over the first situations' moves (half the time), else an avoidance rule correcting up to
    `MAX_CORRECTIONS` of them, each against another admissible action; and the move each rule binds, by situation."""
    rules = first_per_situation(list(zip(situations, moves)))
    if rng.random() < 0.5:
        named = rules[:MAX_WORKFLOW_MOVES]
        return workflow_skill(task, [m for _, m in rules], [s for s, _ in rules]), dict(named)
    picked = [rules[i] for i in sorted(rng.sample(range(len(rules)), min(MAX_CORRECTIONS, len(rules))))]
    fixes = [(sit, rng.choice([a for a in admissible if a != move] or [move]), move) for sit, move in picked]
    return avoidance_skill([corrections(fixes)]), dict(picked)


def warmup_demonstrations(components: Components) -> list[Demonstration]:
    """The format warm-up's demonstrations as configured (`warmup.*`); the analyzer SFT replays the same ones."""
    cfg, w = components.cfg, components.cfg.warmup
    return demonstrations(
        components,
        w.episodes,
        seed=cfg.seed,
        expert_share=w.expert_share,
        thought=w.thought,
        skill_share=w.skill_share,
        foreign_share=w.foreign_skill_share,
    )


def format_warmup(components: Components, progress_factory: Callable[..., Any] | None = None) -> dict:
    """SFT (`seed.train.sft`: one step per token-budget batch) on the demonstrations; returns the mean loss of the
    first and last epoch."""
    cfg, policy = components.cfg, components.policy
    w = cfg.warmup
    pairs = warmup_demonstrations(components)
    longest = max(len(d.response) for d in pairs)
    if longest > cfg.rollout.max_response_tokens:  # the model would learn answers it is never allowed to finish
        raise ConfigError(
            f"format warm-up responses take up to {longest} tokens, more than "
            f"rollout.max_response_tokens={cfg.rollout.max_response_tokens}; raise it"
        )
    params = list(trainable_parameters(policy.model).values())
    opt = adamw(policy.model, lr=w.lr, weight_decay=0.0)
    rng = random.Random(cfg.seed)
    budget = cfg.algo.token_budget
    losses, skipped = [], 0
    policy.release_generation_copy()
    policy.model.train()
    batches_per_epoch = None
    bar = None
    for _ in range(w.epochs):
        rng.shuffle(pairs)
        batches = token_budget_batches([len(d.prompt) + len(d.response) for d in pairs], budget)
        rng.shuffle(batches)
        if bar is None and progress_factory:
            batches_per_epoch = len(batches)
            bar = progress_factory(total=batches_per_epoch * w.epochs, desc="format warm-up")
        epoch_losses = []
        for idx in batches:  # one step per token-budget batch
            loss, stepped = sft_step(policy, opt, params, [SFTTerm([pairs[i] for i in idx], w.action_weight)], budget)
            skipped += not stepped
            epoch_losses.append(loss)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}")
        losses.append(sum(epoch_losses) / max(1, len(epoch_losses)))
    if bar is not None:
        bar.close()
    return {
        "warmup/samples": len(pairs),
        "warmup/first_epoch_loss": losses[0],
        "warmup/last_epoch_loss": losses[-1],
        "warmup/skipped_steps": skipped,
    }
