"""Prompting and action parsing: the only place a prompt is built."""

from seed.agent.parse import ParsedAction, action_token_mask, parse_action
from seed.agent.render import (
    left_truncate,
    prompt_ids,
    prompt_images,
    render,
    render_messages,
    render_text,
    situation,
    skill_block,
)

__all__ = [
    "ParsedAction",
    "action_token_mask",
    "parse_action",
    "left_truncate",
    "prompt_ids",
    "prompt_images",
    "render",
    "render_messages",
    "render_text",
    "situation",
    "skill_block",
]
