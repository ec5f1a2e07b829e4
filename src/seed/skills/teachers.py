"""Teachers that label episodes for the analyzer warm-up.

`OracleTeacher` needs no network: it replays the episode in a fresh copy of its env next to the env's expert
(planner / BFS), and writes a workflow from the moves that brought the goal closer for a success (the agent's
own route less its detours, so the analyzer can read every rule off the episode), or an avoidance rule from the
episode's concrete mistakes for a failure: the first step that did not bring the goal closer, invalid actions,
loops, and the sub-goal never reached. The wording varies (seeded by the episode id) so that an analyzer trained
on these labels has to read the episode rather than memorise a template.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from seed.agent import situation
from seed.envs.base import Env, checked_result
from seed.types import Episode

log = logging.getLogger(__name__)

# A skill stays one short instruction: a failure names the core mistake and at most one more, a success the
# first moves of the route (longer skills made the 135M analyzer loop until its token limit cut the JSON).
MAX_CORRECTIONS = 2
MAX_WORKFLOW_MOVES = 4


@dataclass
class Mistakes:
    deviations: list[tuple[int, str, str]]  # (step, action taken, expert action) where the goal got no closer
    invalid_steps: list[int]
    loop: tuple[str, int] | None  # (action, times)
    expert_plan: list[str]  # the full plan from the initial state
    progress: list[tuple[str, str]] = field(default_factory=list)  # (situation, move) of each move that brought
    # the goal one step closer: a move of some shortest route, taken by the agent itself
    situations: list[str] = field(default_factory=list)  # the situation before each step, in words

    @property
    def first_deviation(self) -> tuple[int, str, str] | None:
        return self.deviations[0] if self.deviations else None


def find_mistakes(env: Env, episode: Episode) -> Mistakes:
    """Replay `episode` on `env` (reset to its task seed) and compare every step with the expert.

    A step's situation is read off the episode's own observation; where the episode saw frames (a visual env), off
    the replay's observation, which the oracle's env (a text copy of the same env) writes in words."""
    obs = env.reset(episode.task_seed)
    plan0 = before = env.expert_plan()
    deviations, invalid, progress, situations = [], [], [], []
    for i, step in enumerate(episode.steps):
        situations.append(situation(obs.text if step.state.images else step.state.observation))
        if not step.valid:
            invalid.append(i)
            continue
        obs = env.step(step.action)[0]
        after = env.expert_plan()  # one search per step: this state's plan is the next step's `before`
        if before and len(after) >= len(before):
            deviations.append((i, step.action, before[0]))
        elif before:
            progress.append((situations[i], step.action))
        before = after
    actions = [s.action for s in episode.steps if s.valid]
    loop = None
    if actions:
        action, times = Counter(actions).most_common(1)[0]
        if times >= 3:
            loop = (action, times)
    if episode.won and not progress:  # an expert whose plan length says nothing about progress: its own route
        plan, situations = expert_route(env, episode.task_seed, MAX_WORKFLOW_MOVES)
        progress = list(zip(situations, plan))
    return Mistakes(deviations, invalid, loop, plan0, first_per_situation(progress), situations)


def expert_route(env: Env, task_seed: int, limit: int | None = None) -> tuple[list[str], list[str]]:
    """The expert's plan from the task's start, and the `situation` before each of its first `limit` moves
    (replayed on `env`)."""
    obs = checked_result("reset", env.reset(task_seed))
    plan = [str(m) for m in env.expert_plan()]
    situations = []
    for move in plan[:limit]:
        situations.append(situation(obs.text))
        obs = env.step(move)[0]
    return plan, situations


def sent_action(step, validity: str) -> str:
    """What the collector sent to the env for this step (`seed.rollout.collector`): under `format` the extracted
    action whatever it is, under `admissible` only a valid one ("" is a no-op)."""
    return step.action if validity == "format" or step.valid else ""


def expert_moves(env: Env, episode: Episode, validity: str = "format") -> list[str | None]:
    """The expert's next move in the state before each step of `episode`, replayed on `env` (reset to its task
    seed) with the actions the collector sent; None where the expert has no move."""
    env.reset(episode.task_seed)
    moves: list[str | None] = []
    for step in episode.steps:
        plan = env.expert_plan()
        moves.append(str(plan[0]) if plan else None)
        env.step(sent_action(step, validity))
    return moves


# One opener per outcome. With four each, a 135M analyzer SFT'd on ~15 successes never learned how a workflow
# begins and copied the episode summary into the skill field instead (every success skill of a default run).
WORKFLOW_OPENER = "What works:"
AVOID_OPENER = "Warning:"


def wording_rng(episode_id: str) -> random.Random:
    return random.Random(int(hashlib.sha256(episode_id.encode()).hexdigest()[:8], 16))


def keyed(situation_text: str, action: str) -> str:
    """One decision rule of a skill: the situation, in the words the observation (and a thought restating it) use,
    and the move to take there. Keyed by situation, a rule is found in the prompt by matching the text the policy
    itself reads and writes; keyed by step number, it has to be looked up by counting."""
    return f"when '{situation_text.rstrip('.')}', take '{action}'"


def rules(situations: list[str], moves: list[str]) -> str:
    """Moves in order as decision rules: "when '...', take 'down'; then when '...', take 'left'"."""
    return "; then ".join(keyed(sit, move) for sit, move in zip(situations, moves))


def workflow_skill(task: str, moves: list[str], situations: list[str]) -> str:
    """The oracle's skill for a success: the moves that brought the goal closer, in order, as decision rules."""
    more = "; then keep going toward the goal" if len(moves) > MAX_WORKFLOW_MOVES else ""
    return (
        f"{WORKFLOW_OPENER} for '{task}': {rules(situations, moves[:MAX_WORKFLOW_MOVES])}{more}. "
        f"Copy each action exactly from the admissible list."
    )


def oracle_skill(episode: Episode, mistakes: Mistakes) -> tuple[str, str]:
    """(summary, skill) for one episode."""
    rng = wording_rng(episode.episode_id)
    n = len(episode.steps)
    if episode.won:
        summary = f"The agent solved '{episode.task}' in {n} step{'s' * (n != 1)}."
        # the agent's own route, less its detours: every rule can be read off the episode the analyzer is shown
        moves, situations = [m for _, m in mistakes.progress], [sit for sit, _ in mistakes.progress]
        return summary, workflow_skill(episode.task, moves, situations)
    parts = []
    if mistakes.deviations:
        parts.append(
            corrections(
                first_per_situation(
                    [(mistakes.situations[i], took, wanted) for i, took, wanted in mistakes.deviations]
                )[:MAX_CORRECTIONS]
            )
        )
    if mistakes.invalid_steps:
        parts.append(
            f"{len(mistakes.invalid_steps)} invalid responses (steps "
            f"{', '.join(map(str, mistakes.invalid_steps[:4]))}) wasted turns; answer with one admissible "
            f"action inside <action></action>"
        )
    if mistakes.loop:
        parts.append(f"'{mistakes.loop[0]}' was repeated {mistakes.loop[1]} times without progress")
    if not parts:
        parts.append("the episode ran out of steps before the goal was reached; act toward the goal every step")
    rng.shuffle(parts)
    summary = f"The agent failed '{episode.task}' after {n} step{'s' * (n != 1)}."
    return summary, avoidance_skill(parts)


def first_per_situation(items: list[tuple]) -> list[tuple]:
    """The first of the (situation, ...) items in each situation, in order: one rule per situation. An agent stuck
    in a loop repeats one mistake, and a rule written twice teaches the analyzer to repeat itself (greedy analyses
    then loop until the token limit)."""
    first: dict[str, tuple] = {}
    for item in items:
        first.setdefault(item[0], item)
    return list(first.values())


def corrections(mistakes: list[tuple[str, str, str]]) -> str:
    """(situation, move taken, move needed) as decision rules: "when '...', take 'left', not 'up'; ..."."""
    return "; ".join(f"{keyed(sit, wanted)}, not '{took}'" for sit, took, wanted in mistakes)


def avoidance_skill(parts: list[str]) -> str:
    """The oracle's skill for a failure: its parts after one of the avoidance openers."""
    return f"{AVOID_OPENER} " + "; ".join(parts) + "."


def oracle_step_skills(episode: Episode, mistakes: Mistakes, limit: int) -> dict[int, str]:
    """OPID-style step skills at the critical steps: the first deviation and the first invalid response
    (failures), or the opening move (successes). Keys are step indices (0-based, as the analysis prompt shows them)."""
    out: dict[int, str] = {}
    if episode.won and mistakes.expert_plan:
        out[0] = f"Start with '{mistakes.expert_plan[0]}', the first move of the shortest route."
    if mistakes.first_deviation:
        step, took, wanted = mistakes.first_deviation
        out[step] = f"Take '{wanted}' here, not '{took}'."
    if mistakes.invalid_steps:
        out.setdefault(mistakes.invalid_steps[0], "Answer with one admissible action inside <action></action>.")
    return dict(sorted(out.items())[:limit])


class Teacher(Protocol):
    """What labels episodes for the analyzer SFT (`label.teacher`) and writes skills for `skill_source: teacher`."""

    name: str

    def label(self, episode: Episode) -> str:
        """The raw analysis (JSON text) of one episode; raises where it cannot be written."""
        ...

    def label_many(self, episodes: list[Episode]) -> list[str | None]:
        """One raw analysis per episode, None where labelling failed: that episode is skipped, not the stage."""
        ...


class OracleTeacher:
    """Labels episodes of a built-in env from its expert; no network."""

    name = "oracle"

    def __init__(self, env_factory: Callable[[], Env], step_skills: int = 0):
        self.env, self.step_skills = env_factory(), step_skills

    def label(self, episode: Episode) -> str:
        mistakes = find_mistakes(self.env, episode)
        summary, skill = oracle_skill(episode, mistakes)
        out = {"episode_summary": summary, "episode_skill": skill}
        if self.step_skills:
            out["step_skills"] = {str(k): v for k, v in oracle_step_skills(episode, mistakes, self.step_skills).items()}
        return json.dumps(out)

    def label_many(self, episodes: list[Episode]) -> list[str | None]:
        out: list[str | None] = []
        for e in episodes:
            try:
                out.append(self.label(e))
            except Exception as exc:  # one episode's replay fault stays in that episode
                log.warning("episode %s not labelled: %r", e.episode_id, exc)
                out.append(None)
        return out
