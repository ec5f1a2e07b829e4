"""Teacher re-scoring: the *same* sampled response ids, scored under the skill-augmented prompt, no grad.

Only steps of episodes that have a skill are scored. The teacher prompt is re-rendered from the step state with
the skill block (never re-tokenized from text) and left-truncated to the prompt limit like the student's, and the
response ids are reused as they were sampled.
"""

from __future__ import annotations

from seed.agent import left_truncate, prompt_images, render
from seed.skills.analyzer import step_skill_text
from seed.types import StepSample


def teacher_pairs(
    tokenizer,
    samples: list[StepSample],
    skills: dict[str, str],
    step_skills: dict[str, dict[int, str]] | None = None,
    max_prompt_tokens: int | None = None,
) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """The samples whose episode has a skill, with their teacher prompts and (sampled) responses.

    With OPID-style step skills, a step's skill block also carries that step's own sentence."""
    step_skills = step_skills or {}
    idx = [i for i, s in enumerate(samples) if skills.get(s.episode_id)]

    def skill_of(s: StepSample) -> str:
        return step_skill_text(skills[s.episode_id], step_skills.get(s.episode_id, {}).get(s.step_index))

    prompts = [
        left_truncate(render(samples[i].state, tokenizer, skill=skill_of(samples[i])), max_prompt_tokens) for i in idx
    ]
    return idx, prompts, [samples[i].response_ids for i in idx]


def rescore(
    teacher_backend,
    tokenizer,
    samples: list[StepSample],
    skills: dict[str, str],
    token_budget: int,
    step_skills: dict[str, dict[int, str]] | None = None,
    max_prompt_tokens: int | None = None,
) -> list[list[float] | None]:
    """Per sample: teacher log-probs of its response tokens, or None when its episode has no skill."""
    idx, prompts, responses = teacher_pairs(tokenizer, samples, skills, step_skills, max_prompt_tokens)
    images = prompt_images([samples[i].state for i in idx])
    scored = teacher_backend.logprobs(prompts, responses, token_budget, images) if idx else []
    out: list[list[float] | None] = [None] * len(samples)
    for i, lp in zip(idx, scored):
        assert len(lp) == len(samples[i].response_ids), "teacher scored a different response"
        out[i] = lp
    return out
