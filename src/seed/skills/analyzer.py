"""The hindsight analyzer: episode -> analysis prompt -> JSON {"episode_summary", "episode_skill"}.

The same prompt serves the warm-up labels (an external teacher or the oracle), the analyzer SFT, and the policy
analysing its own episodes during RL.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from seed.rollout.types import Episode

MIN_SKILL_WORDS = 5

_SUCCESS_SKILL = ("a workflow: the core decision rule and action ordering that made it work")
_FAILURE_SKILL = ("avoidance rules: the core mistake and the warning signs that should trigger a different action")


def analysis_prompt(episode: Episode, max_steps_shown: int = 12, max_chars_per_field: int = 600) -> tuple[str, bool]:
    """The analysis request for one finished episode, and whether the trajectory had to be truncated.

    Long trajectories keep the task, the outcome and the *last* steps (where the outcome was decided).
    """
    success = episode.won
    steps = episode.steps
    truncated = len(steps) > max_steps_shown
    shown = list(enumerate(steps))[-max_steps_shown:]
    lines = [
        "You are analysing one finished episode of an agent acting in a text environment.",
        f"Task: {episode.task}",
        f"episode_success: {'success' if success else 'failure'}",
    ]
    if truncated:
        lines.append(f"(Only the last {max_steps_shown} of {len(steps)} steps are shown.)")
    for i, step in shown:
        lines += [
            f"Step {i + 1}",
            f"Observation: {_clip(step.state.observation, max_chars_per_field)}",
            f"Response: {_clip(step.response_text, max_chars_per_field)}",
            f"Action valid: {'true' if step.valid else 'false'}",
        ]
    lines += [
        "",
        "Reply with valid JSON only, with exactly two fields:",
        '{"episode_summary": "<one or two sentences on what happened>", '
        f'"episode_skill": "<{_SUCCESS_SKILL if success else _FAILURE_SKILL}>"}}',
        "The skill must be one short instruction addressed to the agent for its next attempt at this task, "
        "not a retrospective explanation.",
    ]
    return "\n".join(lines), truncated


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Analysis:
    summary: str
    skill: str | None  # None when the output is unusable: then the episode gets no distillation signal
    parsed: bool
    error: str = ""


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _first_json_object(text: str) -> dict | None:
    """The first decodable JSON object in text: inside a code fence or bare, trailing text ignored."""
    candidates = _FENCE.findall(text) + [text]
    decoder = json.JSONDecoder()
    for cand in candidates:
        for start in [m.start() for m in re.finditer(r"\{", cand)]:
            try:
                obj, _ = decoder.raw_decode(cand[start:])
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def parse_analysis(text: str, min_skill_words: int = MIN_SKILL_WORDS) -> Analysis:
    obj = _first_json_object(text)
    if obj is None:
        return Analysis("", None, False, "no JSON object found")
    summary = str(obj.get("episode_summary", "")).strip()
    skill = obj.get("episode_skill")
    if not isinstance(skill, str) or not skill.strip():
        return Analysis(summary, None, True, "episode_skill missing")
    skill = " ".join(skill.split())
    if len(skill.split()) < min_skill_words:
        return Analysis(summary, None, True, f"episode_skill shorter than {min_skill_words} words")
    return Analysis(summary, skill, True)
