"""Teacher re-scoring: the *same* sampled response ids, scored under the skill-augmented prompt, no grad.

Only steps of episodes that have a skill are scored. The teacher prompt is re-rendered from the step state with
the skill block (never re-tokenized from text), and the response ids are reused as they were sampled.
"""
from __future__ import annotations

from seed.agent import render
from seed.rollout.types import StepSample


def rescore(teacher_backend, tokenizer, samples: list[StepSample], skills: dict[str, str],
            token_budget: int) -> list[list[float] | None]:
    """Per sample: teacher log-probs of its response tokens, or None when its episode has no skill."""
    idx = [i for i, s in enumerate(samples) if skills.get(s.episode_id)]
    prompts = [render(samples[i].state, tokenizer, skill=skills[samples[i].episode_id]) for i in idx]
    responses = [samples[i].response_ids for i in idx]
    scored = teacher_backend.logprobs(prompts, responses, token_budget) if idx else []
    out: list[list[float] | None] = [None] * len(samples)
    for i, lp in zip(idx, scored):
        assert len(lp) == len(samples[i].response_ids), "teacher scored a different response"
        out[i] = lp
        samples[i].teacher_logps = lp  # kept with the episode: per-token views of the skill-induced shift
    return out
