"""Where an episode's skill comes from during RL — each ablation of the paper is a config value:

policy   SEED: the current policy analyses its own finished episodes (greedy, batched, same backend as rollouts)
teacher  OPID-style: an external analyzer (the oracle here) labels the episodes during RL
library     SDAR-style: a static file of skills per task type
privileged  OPSD-style: no analysis; the teacher context is privileged information (the expert's solution of the
            episode's task from its initial state), the same for a success and a failure
sibling     no analysis; the teacher context is another successful episode of the same group (same task, same
            start), rendered compactly as its actions; a group without a success (or whose only success is the
            episode itself) gives that episode no context
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Protocol

from seed.agent import prompt_ids, situation
from seed.models.backend import Sampling
from seed.models.batching import distinct_rows
from seed.skills.analyzer import MIN_SKILL_WORDS, Analysis, analysis_frames, analysis_prompt, parse_analysis
from seed.skills.library import read_skill_library
from seed.skills.teachers import Teacher, expert_route, rules
from seed.types import Episode


class Analyzer(Protocol):
    """Where SEED's skills come from (`distill.skill_source`): one (raw text, Analysis) per finished episode."""

    steps_cut: int  # trajectory steps the last call left out of analysis prompts to fit their budget

    def analyse(self, episodes: list[Episode]) -> list[tuple[str, Analysis]]: ...


class PolicyAnalyzer:
    """SEED's analyzer: the policy itself, greedy, on the rollout engine with the current weights."""

    def __init__(
        self,
        backend,
        tokenizer,
        max_new_tokens: int,
        batch_size: int,
        step_skills: int = 0,
        max_prompt_tokens: int | None = None,
        min_skill_words: int = MIN_SKILL_WORDS,
        skill_first: bool = False,
    ):
        self.backend, self.tokenizer, self.step_skills, self.skill_first = backend, tokenizer, step_skills, skill_first
        self.sampling = Sampling(greedy=True, max_new_tokens=max_new_tokens, stop=())
        self.batch_size, self.max_prompt_tokens, self.min_skill_words = batch_size, max_prompt_tokens, min_skill_words
        self.steps_cut = 0  # trajectory steps left out of the last call's prompts to fit max_prompt_tokens

    def requests(self, episodes: list[Episode]) -> list[tuple[list[int], list]]:
        """Each episode's analysis request as chat token ids (ending with the assistant turn's opening) and the
        frames its placeholders show (none for a text env)."""

        def count(text: str) -> int:
            return len(self.tokenizer.encode(text, add_special_tokens=False))

        out, self.steps_cut = [], 0
        for e in episodes:
            text, cut = analysis_prompt(e, self.step_skills, self.max_prompt_tokens, count, self.skill_first)
            self.steps_cut += cut
            frames = analysis_frames(e, cut)
            out.append((prompt_ids(self.tokenizer, text, len(frames)), frames))
        return out

    def analyse(self, episodes: list[Episode]) -> list[tuple[str, Analysis]]:
        """One analysis per episode. Episodes with the same analysis request (a group's rollouts that went the
        same way) are decoded once; decoding is greedy, so each would get the same text."""
        requests = self.requests(episodes)
        keys, of_episode = distinct_rows([(tuple(ids), frames_key(frames)) for ids, frames in requests])
        first = {k: i for i, k in reversed(list(enumerate(of_episode)))}  # each distinct request's first episode
        distinct = [requests[first[k]] for k in range(len(keys))]
        gens = self.backend.generate(
            [ids for ids, _ in distinct],
            self.sampling,
            batch_size=self.batch_size,
            images=[frames for _, frames in distinct] if any(frames for _, frames in distinct) else None,
        )
        return [
            (gens[k].text, parse_analysis(gens[k].text, self.min_skill_words, self.step_skills, len(e.steps)))
            for k, e in zip(of_episode, episodes)
        ]


def frames_key(frames: list) -> tuple[str, ...]:
    """What tells two requests' frames apart: a digest of each frame's pixels (their texts can be equal)."""
    return tuple(hashlib.sha1(f.tobytes()).hexdigest() for f in frames)


class TeacherAnalyzer:
    def __init__(self, teacher: Teacher, step_skills: int = 0, min_skill_words: int = MIN_SKILL_WORDS):
        self.teacher, self.step_skills, self.min_skill_words = teacher, step_skills, min_skill_words
        self.steps_cut = 0

    def analyse(self, episodes: list[Episode]) -> list[tuple[str, Analysis]]:
        out = []
        for e in episodes:
            try:
                raw = self.teacher.label(e)
            except Exception as exc:  # a teacher fault (its env, its endpoint) costs this episode its skill
                out.append(("", unusable(f"teacher failed: {type(exc).__name__}: {exc}"[:300])))
                continue
            out.append((raw, parse_analysis(raw, self.min_skill_words, self.step_skills, len(e.steps))))
        return out


def unusable(why: str) -> Analysis:
    """An analysis that gives its episode no skill (counted in distill/parse_rate and distill/skill_rate)."""
    return Analysis("", None, False, why)


class LibraryAnalyzer:
    """Skills from a static file: {task_type: skill} (YAML or JSON); "default" covers unlisted types."""

    steps_cut = 0  # nothing is cut: no analysis prompt

    def __init__(self, path: str):
        self.skills = read_skill_library(path)

    def analyse(self, episodes: list[Episode]) -> list[tuple[str, Analysis]]:
        out = []
        for e in episodes:
            skill = self.skills.get(e.task_type) or self.skills.get("default")
            raw = json.dumps({"episode_summary": "", "episode_skill": skill or ""})
            out.append((raw, parse_analysis(raw)))
        return out


class PrivilegedAnalyzer:
    """The expert's plan for each episode's task, read from a fresh env reset to the episode's task seed."""

    steps_cut = 0  # nothing is cut: no analysis prompt

    def __init__(self, env_factory: Callable):
        self.env = env_factory()

    def analyse(self, episodes: list[Episode]) -> list[tuple[str, Analysis]]:
        out = []
        for e in episodes:
            try:
                plan, situations = expert_route(self.env, e.task_seed)
            except Exception as exc:  # an env fault costs this episode its teacher context, not the run
                out.append(("", unusable(f"expert failed: {type(exc).__name__}: {exc}"[:300])))
                continue
            skill = f"A shortest solution from the start: {rules(situations, plan)}." if plan else ""
            raw = json.dumps({"episode_summary": "", "episode_skill": skill})
            out.append((raw, parse_analysis(raw)))
        return out


def compact_episode(episode: Episode) -> str:
    """A successful episode as a teacher context: the actions it took, in order, each as a rule for the situation
    it was taken in (the skills' format)."""
    taken = [s for s in episode.steps if s.valid and s.action]
    return (
        f"A successful attempt at this task from the same start took {len(episode.steps)} steps: "
        f"{rules([situation(s.state.observation) for s in taken], [s.action for s in taken])}."
    )


def sibling_contexts(episodes: list[Episode], donors: list[Episode] | None = None) -> list[str | None]:
    """Per episode: `compact_episode` of the first other successful episode of its group among `donors` (default:
    the episodes themselves), or None."""
    wins: dict[int, list[Episode]] = {}
    for e in episodes if donors is None else donors:
        if e.won and e.error is None:
            wins.setdefault(e.group_id, []).append(e)
    out = []
    for e in episodes:
        other = next((w for w in wins.get(e.group_id, []) if w is not e), None)
        out.append(compact_episode(other) if other is not None else None)
    return out


class SiblingAnalyzer:
    """No analysis: each episode's teacher context is a successful sibling from its group (`sibling_contexts`)."""

    steps_cut = 0  # nothing is cut: no analysis prompt

    def analyse(self, episodes: list[Episode]) -> list[tuple[str, Analysis]]:
        out = []
        for context in sibling_contexts(episodes):
            raw = json.dumps({"episode_summary": "", "episode_skill": context or ""})
            out.append((raw, parse_analysis(raw) if context else unusable("no other success in the group")))
        return out
