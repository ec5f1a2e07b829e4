"""Turn a model response into an env action, and say whether it is valid (`rollout.validity`).

format (the official rule): valid when the response has a `<think>…</think>` and an `<action>…</action>` pair and
no CJK characters; the action inside goes to the env whether or not it is admissible (ALFWorld answers "Nothing
happens."), so only malformed responses are penalised.
admissible: valid when the response holds exactly one of each pair and the action is admissible (case and
surrounding whitespace ignored); anything else is a no-op step for the env.

An env may answer in other tags (Search-QA: `<search>query</search>` or `<answer>text</answer>`, its
`action_tags`): the first such block is the action, sent as `tag[text]`, and the response is valid when it also
has a `<think>` pair and no CJK characters (free text has no admissible list to check).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VALIDITY_RULES = ("format", "admissible")
ACTION_TAGS = ("action",)  # an env's default answer tags
_CJK = re.compile(r"[\u4e00-\u9fff]")


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
        out.append(text[start + len(open_tag) : end])
        start = text.find(open_tag, end + len(close_tag))
    return out


def parse_action(
    response: str, admissible: list[str] | None, validity: str = "admissible", tags: tuple[str, ...] = ACTION_TAGS
) -> ParsedAction:
    if tuple(tags) != ACTION_TAGS:
        return parse_tagged(response, tuple(tags))
    if validity == "format":
        return parse_format(response, admissible)
    if validity != "admissible":
        raise ValueError(f"validity must be one of {', '.join(VALIDITY_RULES)}; got {validity!r}")
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


def parse_format(response: str, admissible: list[str] | None) -> ParsedAction:
    """The official rule: the first `<action>` block's text (lower-cased, as the official) is the action; the
    response is valid when both tag pairs are present and it has no CJK characters. An admissible action is sent in
    its admissible spelling; anything else is sent as written."""
    low = response.lower()
    start, end = low.find("<action>"), low.find("</action>")
    if start < 0 or end < start:
        return ParsedAction("", False, "no <action>...</action> pair")
    action = " ".join(low[start + len("<action>") : end].split())
    action = {a.lower(): a for a in admissible or []}.get(action, action)
    if "<think>" not in response or "</think>" not in response:
        return ParsedAction(action, False, "no <think>...</think> pair")
    if _CJK.search(response):
        return ParsedAction(action, False, "CJK characters in the response")
    return ParsedAction(action, True)


def first_block(text: str, tags: tuple[str, ...]) -> tuple[str, int, int] | None:
    """The tag of the earliest complete `<tag>…</tag>` block among `tags` (case ignored), and its content's span."""
    low, found = text.lower(), None
    for tag in tags:
        start = low.find(f"<{tag}>")
        end = low.find(f"</{tag}>", start + len(tag) + 2) if start >= 0 else -1
        if end >= 0 and (found is None or start < found[1] - len(found[0]) - 2):
            found = (tag, start + len(tag) + 2, end)
    return found


def parse_tagged(response: str, tags: tuple[str, ...]) -> ParsedAction:
    """An env with answer tags of its own: the first block is the action, `tag[text]`."""
    block = first_block(response, tags)
    if block is None:
        return ParsedAction("", False, f"no {' or '.join(f'<{t}>...</{t}>' for t in tags)} block")
    tag, start, end = block
    action = f"{tag}[{' '.join(response[start:end].split())}]"
    if "<think>" not in response or "</think>" not in response:
        return ParsedAction(action, False, "no <think>...</think> pair")
    if _CJK.search(response):
        return ParsedAction(action, False, "CJK characters in the response")
    return ParsedAction(action, True)


def split_action(action: str, tags: tuple[str, ...] = ACTION_TAGS) -> tuple[str, str]:
    """(tag, text) of the answer block that sends `action`: ("action", "up"), or ("search", "q") for `search[q]`."""
    if tuple(tags) == ACTION_TAGS:
        return "action", action
    tag, _, rest = action.partition("[")
    if tag not in tags or not rest.endswith("]"):
        raise ValueError(f"action {action!r} is not one of {', '.join(f'{t}[...]' for t in tags)}")
    return tag, rest[:-1]


def format_action(action: str, tags: tuple[str, ...] = ACTION_TAGS) -> str:
    """The answer block that sends `action`: `<action>up</action>`, or `<search>q</search>` for `search[q]`."""
    tag, text = split_action(action, tags)
    return f"<{tag}>{text}</{tag}>"


def action_token_mask(token_texts: list[str], tags: tuple[str, ...] = ACTION_TAGS) -> list[bool]:
    """Per response token: whether it overlaps the text inside the first answer block (`<action>…</action>`),
    i.e. whether it is one of the tokens that choose the action (the rest are the thought, the tags and the end of
    turn)."""
    block = first_block("".join(token_texts), tuple(tags))
    if block is None:
        return [False] * len(token_texts)
    _, first, last = block
    out, pos = [], 0
    for text in token_texts:
        out.append(pos < last and pos + len(text) > first)
        pos += len(text)
    return out
