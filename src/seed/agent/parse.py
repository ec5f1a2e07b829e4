"""Turn a model response into an env action, and say whether it is valid.

A response is valid when it holds exactly one `<think>…</think>` and one `<action>…</action>` pair and the action
is admissible (case and surrounding whitespace ignored). Anything else is a no-op step for the env.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ParsedAction:
    action: str  # what the env receives (the admissible spelling when valid)
    valid: bool
    reason: str = ""


def blocks(text: str, tag: str) -> list[str]:
    """The contents of every non-overlapping `<tag>…</tag>` block, as a lazy regex would find them, in linear time:
    once an opening tag has no closing tag after it, no later one can have one either."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    out, start = [], text.find(open_tag)
    while start >= 0:
        end = text.find(close_tag, start + len(open_tag))
        if end < 0:
            break
        out.append(text[start + len(open_tag):end])
        start = text.find(open_tag, end + len(close_tag))
    return out


def parse_action(response: str, admissible: list[str] | None) -> ParsedAction:
    actions = blocks(response, "action")
    if len(actions) != 1:
        return ParsedAction("", False, f"expected one <action> block, found {len(actions)}")
    if len(blocks(response, "think")) != 1:
        return ParsedAction(actions[0].strip(), False, "expected one <think> block")
    action = " ".join(actions[0].strip().split())
    if admissible:
        lookup = {a.lower(): a for a in admissible}
        if action.lower() not in lookup:
            return ParsedAction(action, False, "action is not admissible")
        action = lookup[action.lower()]
    elif not action:
        return ParsedAction(action, False, "empty action")
    return ParsedAction(action, True)
