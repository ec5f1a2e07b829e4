"""Turn a model response into an env action, and say whether it is valid.

A response is valid when it holds exactly one `<think>…</think>` and one `<action>…</action>` pair and the action
is admissible (case and surrounding whitespace ignored). Anything else is a no-op step for the env.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL)


@dataclass
class ParsedAction:
    action: str  # what the env receives (the admissible spelling when valid)
    valid: bool
    reason: str = ""


def parse_action(response: str, admissible: list[str] | None) -> ParsedAction:
    actions = _ACTION.findall(response)
    if len(actions) != 1:
        return ParsedAction("", False, f"expected one <action> block, found {len(actions)}")
    if len(_THINK.findall(response)) != 1:
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
