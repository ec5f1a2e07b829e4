"""The one prompt renderer: StepState -> chat messages -> token ids, for student *and* teacher.

The teacher prompt is the student prompt with a skill block inserted right after the task line; nothing else
differs, and the response token ids are the sampled ones in both cases (they are never re-tokenized). A state with
images (the current observation's frames) puts one image part per frame before the text, as the official visual
prompts open with the image; the chat template writes each as one placeholder token, which the model's backend
expands with the frame's pixels (`seed.models.vision`). History windows stay text, as in the official visual
Sokoban and EZPoints prompts, which show the current frame only.
"""

from __future__ import annotations

import re

from seed.envs.base import answer_format, intro
from seed.types import StepState

SKILL_HEADER = "**Episode-Level Skill**"
SKILL_INSTRUCTION = "Refer to this episode-level skill when deciding what action to take in the current episode:"

ANSWER_FORMAT = (
    "Now it's your turn to take an action. First reason about the current situation inside <think> </think> "
    "tags, then give one admissible action inside <action> </action> tags."
)


def skill_block(skill: str) -> str:
    """The official block: a bold header, the instruction line, the skill in square brackets."""
    return f"{SKILL_HEADER}\n{SKILL_INSTRUCTION}\n[{skill.strip()}]\n"


def render_text(state: StepState, skill: str | None = None) -> str:
    """The user message for one step (verl-agent's ALFWorld template shape); `skill=None` is the student prompt."""
    lines = [f"{state.intro or intro(state.env_name)} Your task is to: {state.task}\n"]
    if skill is not None:  # "" gives the block with nothing in it (`seed probe`'s control)
        lines.append(skill_block(skill))
    if state.step_index > 0 and state.history:
        pairs = "\n".join(
            f"[Observation {state.step_index - len(state.history) + i + 1}: '{obs}', Action: '{act}']"
            for i, (obs, act) in enumerate(state.history)
        )
        lines.append(
            f"Prior to this step, you have already taken {state.step_index} step(s). Below are the most recent "
            f"{len(state.history)} observations and the corresponding actions you took:\n{pairs}\n"
        )
    lines.append(f"You are now at step {state.step_index + 1} and your current observation is:\n{state.observation}\n")
    if state.admissible:
        lines.append(
            "Your admissible actions of the current situation are: ["
            + ", ".join(f"'{a}'" for a in state.admissible)
            + "].\n"
        )
    lines.append(answer_format(state.env_name) or ANSWER_FORMAT)
    return "\n".join(lines)


IMAGE_MARK = "<image>"  # where a text shows a frame (the official visual prompts' placeholder)


def user_message(user_text: str, images: int = 0) -> dict:
    """One user turn in the processors' chat format: plain text; or, with `images`, an image part at each
    `IMAGE_MARK` of the text (the analysis prompt's frames, one per step), or all of them before the text where
    it has no mark (a step prompt's current frame)."""
    if not images:
        return {"role": "user", "content": user_text}
    pieces = user_text.split(IMAGE_MARK)
    if len(pieces) == 1:
        return {"role": "user", "content": [{"type": "image"}] * images + [{"type": "text", "text": user_text}]}
    if len(pieces) - 1 != images:
        raise ValueError(f"a prompt marks {len(pieces) - 1} images with {IMAGE_MARK!r} but has {images}")
    content: list[dict] = []
    for k, piece in enumerate(pieces):
        if piece:
            content.append({"type": "text", "text": piece})
        if k < images:
            content.append({"type": "image"})
    return {"role": "user", "content": content}


def render_messages(state: StepState, skill: str | None = None) -> list[dict]:
    return [user_message(render_text(state, skill), len(state.images))]


def render(state: StepState, tokenizer, skill: str | None = None) -> list[int]:
    """Prompt token ids, ending with the assistant turn's opening (generation prompt)."""
    return prompt_ids(tokenizer, render_text(state, skill), len(state.images))


def prompt_ids(tokenizer, user_text: str, images: int = 0) -> list[int]:
    """A one-message chat as token ids, ending with the assistant turn's opening: every prompt the policy sees
    (an env step, an analysis request) goes through here. `images`: how many image placeholders open it."""
    try:
        ids = tokenizer.apply_chat_template(
            [user_message(user_text, images)], add_generation_prompt=True, tokenize=True
        )
    except Exception as exc:  # a text model's template meets image parts
        if not images:
            raise
        raise ValueError(
            f"the tokenizer's chat template cannot write image parts ({type(exc).__name__}: {exc}); an env with "
            "image observations needs a vision-language model"
        ) from exc
    return list(ids if isinstance(ids, list) else ids["input_ids"])  # newer transformers return a BatchEncoding


def prompt_images(states: list[StepState]) -> list[list] | None:
    """Each state's frames for a backend call, or None where no state has any (a text env)."""
    return [list(st.images) for st in states] if any(st.images for st in states) else None


def left_truncate(ids: list[int], limit: int | None) -> list[int]:
    """The last `limit` tokens of a prompt that is too long (the official truncation side: the task and skill
    lines go first, the current observation and the answer format stay)."""
    return ids[-limit:] if limit and len(ids) > limit else ids


def situation(observation: str) -> str:
    """The first sentence of the observation's last line, e.g. 'The box is 1 step up from you.': what a thought
    restates and what a situation-keyed skill names."""
    lines = [line.strip() for line in observation.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    first = re.split(r"(?<=[.;!?])\s", last, maxsplit=1)[0].rstrip(";.") if last else "I look around"
    return first + "."
