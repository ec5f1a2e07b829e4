"""The hindsight analyzer: episode -> analysis prompt -> JSON {"episode_summary", "episode_skill"}.

The same prompt serves the warm-up labels (an external teacher or the oracle), the analyzer SFT, and the policy
analysing its own episodes during RL. With `step_skills=K > 0` (OPID style, off by default) the JSON also carries
up to K one-sentence skills keyed by step number, for the critical steps only.

An episode with image observations is analysed with its frames (the official visual analysis prompt): each step's
observation shows an image placeholder, the frames go along in order (`analysis_frames`), and the env's text for
the step follows the placeholder (the official prompt drops it; EZPoints' formula is only in the text).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from seed.agent.render import IMAGE_MARK
from seed.types import Episode

MIN_SKILL_WORDS = 1  # the official RL path keeps any non-empty skill (`distill.min_skill_words`)

_SKILL_WORDING = {
    True: "Write one episode_skill that turns the successful trajectory into a workflow: the core decision rule "
    "and the action ordering that made it work.",
    False: "Write one episode_skill that turns the failed trajectory into avoidance rules: the core mistake and "
    "the warning signs the agent should avoid.",
}


def _step_text(i: int, step) -> str:
    frames = IMAGE_MARK * len(step.state.images)
    return (
        f"Step {i}\nObservation: {frames + ' ' if frames else ''}{step.state.observation}\n"
        f"Response: {step.response_text}\nAction valid: {'true' if step.valid else 'false'}\n"
    )


def analysis_frames(episode: Episode, cut: int = 0) -> list:
    """The frames an analysis prompt shows, in the order of its placeholders (the steps after the `cut` left out)."""
    return [image for step in episode.steps[cut:] for image in step.state.images]


def analysis_prompt(
    episode: Episode,
    step_skills: int = 0,
    max_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
    skill_first: bool = False,
) -> tuple[str, int]:
    """The analysis request for one finished episode, and how many of its steps had to be left out.

    Every step is shown in full (numbered from 0, as the official prompt). Only when the prompt would exceed
    `max_tokens` (counted by `count_tokens`, e.g. a tokenizer's length) are the earliest steps left out, one by one,
    and the prompt says so: the outcome is decided late, and the skill must fit the analyzer's context.
    `skill_first` asks for episode_skill before episode_summary (`distill.skill_first`)."""
    steps = [_step_text(i, s) for i, s in enumerate(episode.steps)]
    cut = 0
    text = _prompt_text(episode, steps, 0, step_skills, skill_first)
    if max_tokens is not None and count_tokens is not None:
        while cut < len(steps) - 1 and count_tokens(text) > max_tokens:
            cut += 1
            text = _prompt_text(episode, steps, cut, step_skills, skill_first)
    return text, cut


def _prompt_text(episode: Episode, steps: list[str], cut: int, step_skills: int, skill_first: bool = False) -> str:
    order = [1, 0] if skill_first else [0, 1]
    fields = [["episode_summary", "episode_skill"][i] for i in order] + (["step_skills"] if step_skills else [])
    tasks = [["Write a concise episode_summary.", _SKILL_WORDING[bool(episode.won)]][i] for i in order]
    shape = "{\n" + ",\n".join(f'  "{name}": "string"' for name in fields[:2])
    if step_skills:
        tasks.append(
            f"Give concise, action-oriented skills for at most {step_skills} critical step(s) as "
            "entries of step_skills, keyed by step index; use the whole episode to infer them, but phrase "
            "each as advice the policy can act on at that step."
        )
        shape += ',\n  "step_skills": {"0": "skill for step 0"}'
    numbered = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(tasks))
    omitted = f"(Steps 0 to {cut - 1} are left out to fit the context.)\n" if cut else ""
    return (
        "Analyze the following agent episode and return ONLY valid JSON.\n\n"
        f"You need to complete {len(tasks)} fields:\n{numbered}\n\n"
        "Important constraints:\n"
        "- Step indexing is 0-based: step 0 is the first step of the trajectory.\n"
        "- Write episode_skill as one short policy-facing skill, not as a retrospective explanation of the "
        "trajectory.\n"
        f"- Return only these top-level fields: {', '.join(fields)}.\n\n"
        f"Return format:\n{shape}\n}}\n\n"
        "Episode context:\n"
        f"- Task description: {episode.task or '(not available)'}\n"
        f"- episode_success: {'success' if episode.won else 'failure'}\n"
        f"- Interaction trajectory: {omitted}{''.join(steps[cut:])}"
    )


@dataclass
class Analysis:
    summary: str
    skill: str | None  # None when the output is unusable: then the episode gets no distillation signal
    parsed: bool
    error: str = ""
    step_skills: dict[int, str] = field(default_factory=dict)  # step index (0-based, as shown) -> sentence


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
MAX_JSON_STARTS = 64  # "{" positions tried per candidate text: bounds the work at O(64 n)
MAX_LITERAL_CHARS = 20_000  # a Python-dict slice longer than this is not evaluated


def _json_objects(text: str) -> list[dict]:
    """Every decodable object in text, as the official reader finds them: inside code fences or bare, with
    literal newlines allowed inside strings, trailing commas repaired, and Python-literal dicts (single quotes)
    as the fallback. Model output is hostile input: nesting deep enough to exhaust the recursion limit, numbers
    too long to convert, thousands of stray braces. Each is a failed candidate, never an exception, and at most
    MAX_JSON_STARTS starts are tried per candidate text, so the time is linear in the length."""
    fenced = [b.strip() for b in _FENCE.findall(text) if b.strip()] if "```" in text else []
    out: list[dict] = []
    for cand in fenced + [text.strip()]:
        repaired = _TRAILING_COMMA.sub(r"\1", cand)
        for variant in [cand, repaired] if repaired != cand else [cand]:
            found = _decoded(variant) or _python_literals(variant)
            out.extend(found)
    return out


def _decoded(text: str) -> list[dict]:
    decoder, found = json.JSONDecoder(strict=False), []
    start = text.find("{")
    for _ in range(MAX_JSON_STARTS):
        if start < 0:
            break
        try:
            obj, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # JSONDecodeError, int too long, nesting too deep
            obj = None
        if isinstance(obj, dict):
            found.append(obj)
        start = text.find("{", start + 1)
    return found


def _python_literals(text: str) -> list[dict]:
    found = []
    for piece in _balanced_objects(text)[:MAX_JSON_STARTS]:
        if len(piece) > MAX_LITERAL_CHARS:
            continue
        try:
            obj = ast.literal_eval(piece)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def _balanced_objects(text: str) -> list[str]:
    """The top-level {...} slices of text, quotes (single or double) respected; one linear scan."""
    slices, start, depth, quote, escape = [], -1, 0, "", False
    for i, ch in enumerate(text):
        if escape:
            escape = False
        elif quote:
            if ch == "\\":
                escape = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                slices.append(text[start : i + 1])
    return slices


def _first_json_object(text: str) -> dict | None:
    """The object that holds `episode_skill`, else one cut off by the token limit after a complete `episode_skill`
    string, else the first object found, else None."""
    objects = _json_objects(text)
    held = next((o for o in objects if "episode_skill" in o), None)
    return held or _cut_object(text) or (objects[0] if objects else None)


_SKILL_STRING = re.compile(r'"episode_skill"\s*:\s*("(?:[^"\\]|\\.)*")')


def _cut_object(text: str) -> dict | None:
    """`{"episode_skill": <its complete string>}` from an object that never closes (the decoding hit its token
    limit, e.g. in the summary after the skill), else None; an object that closes but does not decode is not cut."""
    start = text.find("{")
    if start < 0 or _balanced_objects(text[start:]):
        return None
    found = _SKILL_STRING.search(text, start)
    if found is None:
        return None
    try:
        skill = json.loads(found.group(1), strict=False)
    except ValueError:
        return None
    return {"episode_skill": skill}


def parse_analysis(
    text: str, min_skill_words: int = MIN_SKILL_WORDS, max_step_skills: int = 0, num_steps: int | None = None
) -> Analysis:
    """Extract and validate the analyzer's JSON; never raises (unusable output gives `skill=None`). Step skills are
    read only when `max_step_skills > 0`; entries whose key is not a step index of the episode (0-based), or whose
    sentence is shorter than 3 words, are dropped."""
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
        if (num_steps is not None and step >= num_steps) or not isinstance(value, str):
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
