"""The hindsight analyzer: episode -> analysis prompt -> JSON {"episode_summary", "episode_skill"}.

The same prompt serves the warm-up labels (an external teacher or the oracle), the analyzer SFT, and the policy
analysing its own episodes during RL. With `step_skills=K > 0` (OPID style, off by default) the JSON also carries
up to K one-sentence skills keyed by step number, for the critical steps only.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from seed.rollout.types import Episode

MIN_SKILL_WORDS = 5

_SUCCESS_SKILL = ("a workflow: the core decision rule and action ordering that made it work")
_FAILURE_SKILL = ("avoidance rules: the core mistake and the warning signs that should trigger a different action")


def analysis_prompt(episode: Episode, max_steps_shown: int = 12, max_chars_per_field: int = 600,
                    step_skills: int = 0) -> tuple[str, bool]:
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
    fields = ('{"episode_summary": "<one or two sentences on what happened>", '
              f'"episode_skill": "<{_SUCCESS_SKILL if success else _FAILURE_SKILL}>"')
    if step_skills:
        fields += ', "step_skills": {"<step number>": "<one imperative sentence for that step>"}'
    lines += [
        "",
        f"Reply with valid JSON only, with exactly {'three' if step_skills else 'two'} fields:",
        fields + "}",
        "The skill must be one short instruction addressed to the agent for its next attempt at this task, "
        "not a retrospective explanation.",
    ]
    if step_skills:
        lines.append(f"step_skills holds at most {step_skills} entries, only for the steps that decided the outcome.")
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
    step_skills: dict[int, str] = field(default_factory=dict)  # step number (1-based, as shown) -> sentence


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
MAX_JSON_STARTS = 64  # "{" positions tried per candidate text: bounds the work at O(64 n)


def _first_json_object(text: str) -> dict | None:
    """The first decodable JSON object in text: inside a code fence or bare, trailing text ignored.

    Model output is hostile input: nesting deep enough to exhaust the recursion limit, numbers too long to convert,
    thousands of stray braces. Each is a failed candidate, never an exception, and at most MAX_JSON_STARTS starts
    are tried per candidate text, so the time is linear in the length."""
    candidates = (_FENCE.findall(text) if "```" in text else []) + [text]
    decoder = json.JSONDecoder()
    for cand in candidates:
        start = cand.find("{")
        for _ in range(MAX_JSON_STARTS):
            if start < 0:
                break
            try:
                obj, _ = decoder.raw_decode(cand, start)
            except (ValueError, RecursionError):  # JSONDecodeError, int too long, nesting too deep
                obj = None
            if isinstance(obj, dict):
                return obj
            start = cand.find("{", start + 1)
    return None


def parse_analysis(text: str, min_skill_words: int = MIN_SKILL_WORDS, max_step_skills: int = 0,
                   num_steps: int | None = None) -> Analysis:
    """Extract and validate the analyzer's JSON; never raises (unusable output gives `skill=None`). Step skills are
    read only when `max_step_skills > 0`; entries whose key is not a shown step number, or whose sentence is
    shorter than 3 words, are dropped."""
    if not isinstance(text, str):
        return Analysis("", None, False, f"analyzer output is {type(text).__name__}, not text")
    try:
        return _parse_object(_first_json_object(text), min_skill_words, max_step_skills, num_steps)
    except (ValueError, RecursionError, TypeError) as exc:  # a value too large or deep to turn into text
        return Analysis("", None, False, f"unusable JSON values: {type(exc).__name__}")


def _parse_object(obj: dict | None, min_skill_words: int, max_step_skills: int, num_steps: int | None) -> Analysis:
    if obj is None:
        return Analysis("", None, False, "no JSON object found")
    summary = obj.get("episode_summary", "")
    summary = " ".join(summary.split()) if isinstance(summary, str) else ""
    skill = obj.get("episode_skill")
    if not isinstance(skill, str) or not skill.strip():
        return Analysis(summary, None, True, "episode_skill missing")
    skill = " ".join(skill.split())
    if len(skill.split()) < min_skill_words:
        return Analysis(summary, None, True, f"episode_skill shorter than {min_skill_words} words")
    steps = _step_skills(obj.get("step_skills"), max_step_skills, num_steps) if max_step_skills else {}
    return Analysis(summary, skill, True, step_skills=steps)


def _step_skills(raw, limit: int, num_steps: int | None) -> dict[int, str]:
    if not isinstance(raw, dict):
        return {}
    out: dict[int, str] = {}
    for key, value in raw.items():
        digits = str(key).strip().removeprefix("Step").strip()
        if not (digits.isdigit() and len(digits) <= 6):
            continue
        step = int(digits)
        if step < 1 or (num_steps is not None and step > num_steps) or not isinstance(value, str):
            continue
        value = " ".join(value.split())
        if len(value.split()) >= 3:
            out[step] = value
        if len(out) == limit:
            break
    return out


def step_skill_text(skill: str, step_skill: str | None) -> str:
    """The skill block's text for one step: the episode skill, plus that step's own skill when it has one."""
    return f"{skill}\nAt this step: {step_skill}" if step_skill else skill
