"""Hostile model output through both parsers: never an exception, time linear in the length.

The inputs are generated deterministically: fragments of JSON, tags and fences, deep nesting, huge numbers,
thousands of unclosed tags, random characters, in lengths up to 64 KB.
"""

import json
import random
import time

from seed.agent import parse_action
from seed.skills.analyzer import parse_analysis

FRAGMENTS = [
    "{",
    "}",
    "[",
    "]",
    '"',
    ":",
    ",",
    "\\",
    '{"episode_skill": ',
    '{"episode_summary": "x", ',
    '"step_skills": {"1": "go left now"}',
    "<action>",
    "</action>",
    "<think>",
    "</think>",
    "```json\n",
    "```",
    "up",
    "Avoid walking into walls next time.",
    "1e999",
    "-0",
    "null",
    "true",
    "NaN",
    "\u4e2d",
    "\x00",
    "\n",
    " ",
    "9" * 50,
    "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
]


def adversarial() -> list[str]:
    """The inputs that used to raise or take seconds, each about 64 KB or more."""
    skill = "Push the box up twice then left."
    return [
        '{"episode_skill": ' + "[" * 995 + "]" * 995 + "}",  # RecursionError in json
        '{"episode_skill": "' + skill + '", "episode_summary": ' + "7" * 5000 + "}",  # int longer than 4300 digits
        '{"episode_summary": ' + "[" * 900 + "1" + "]" * 900 + ', "episode_skill": "' + skill + '"}',
        "<action>" * 20_000,  # quadratic regex on unclosed tags
        "<think>" * 10_000 + "<action>up</action>",
        "{" * 65_536,
        '{"a": "' + "{" * 65_536,  # every start scans an unterminated string
        '{"episode_skill": "' + "x " * 32_768,
        "```" * 21_846,
        "```json\n" + "{" * 65_536,
        json.dumps({"episode_summary": "s" * 60_000, "episode_skill": skill}),
        '{"step_skills": {'
        + ", ".join(f'"{i}": "step {i} go up"' for i in range(4_000))
        + '}, "episode_skill": "'
        + skill
        + '"}',
    ]


def generated(n: int, seed: int = 0) -> list[str]:
    """n inputs: runs of fragments and random characters; every tenth one 64 KB long."""
    rng = random.Random(seed)
    pieces = [rng.choice(FRAGMENTS) * rng.choice([1, 1, 1, 3, 50]) for _ in range(3_000)]
    pieces += ["".join(chr(rng.randrange(32, 0x3000)) for _ in range(rng.randrange(1, 40))) for _ in range(1_000)]
    mean = sum(map(len, pieces)) / len(pieces)
    out = []
    for i in range(n):
        size = rng.choice([8, 64, 512, 4096, 65_536]) if i % 10 else 65_536
        out.append("".join(rng.choices(pieces, k=int(size / mean) + 2))[:size])
    return out


def _timed(fn, text):
    """CPU seconds, not wall: other work on the machine must not fail the test."""
    t0 = time.process_time()
    fn(text)
    return time.process_time() - t0


def test_hostile_inputs_never_raise_and_parse_in_linear_time():
    inputs = adversarial() + generated(10_000 - len(adversarial()))
    assert len(inputs) == 10_000
    slowest = 0.0
    for text in inputs:
        analysis = parse_analysis(text, max_step_skills=3, num_steps=5)  # must not raise
        assert analysis.skill is None or isinstance(analysis.skill, str)
        action = parse_action(text, ["up", "down", "left", "right"])
        assert isinstance(action.valid, bool)
        if len(text) >= 65_536:
            slowest = max(
                slowest,
                _timed(lambda t: parse_analysis(t, max_step_skills=3), text),
                _timed(lambda t: parse_action(t, ["up"]), text),
            )
    # linear parsing takes a few ms of CPU on 64 KB: the bound catches super-linear blow-ups, not small slow-downs
    assert slowest < 0.25, f"slowest 64 KB input took {slowest * 1000:.1f} ms of CPU"


def test_the_adversarial_inputs_give_unusable_analyses_not_exceptions():
    deep, long_int, deep_summary = adversarial()[:3]
    assert parse_analysis(deep).skill is None
    assert parse_analysis(long_int).skill is None  # the object does not decode: no skill, counted
    assert parse_analysis(deep_summary).skill == "Push the box up twice then left."
    assert parse_action("<action>" * 20_000, ["up"]).reason == "expected one <action> block, found 0"


def test_blocks_match_the_lazy_regex_they_replace():
    import re

    rng = random.Random(1)
    for _ in range(2_000):
        text = "".join(rng.choice(["<action>", "</action>", "a", "b", "<act", "ion>", "<"]) for _ in range(12))
        from seed.agent.parse import blocks

        assert blocks(text, "action") == re.findall(r"<action>(.*?)</action>", text, re.DOTALL)
