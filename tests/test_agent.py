"""The one renderer: teacher prompt = student prompt + skill block after the task line; responses untouched."""

import pytest

from seed.agent import parse_action, render, render_text, skill_block
from seed.envs import make
from seed.types import StepState


def _states():
    out = []
    for name in ("sokoban", "alfworld"):
        env = make(name)
        obs = env.reset(1)
        out.append(StepState(name, obs.task, obs.text, obs.admissible, [("earlier obs", "earlier act")], 1))
    return out


@pytest.mark.parametrize("state", _states(), ids=["sokoban", "alfworld"])
def test_skill_prompt_differs_only_by_skill_block(state, tokenizer):
    skill = "Go to the receptacle named in the task before picking anything up."
    plain, taught = render_text(state), render_text(state, skill=skill)
    task_line_end = plain.index("\n") + 1
    assert taught == plain[:task_line_end] + "\n" + skill_block(skill) + plain[task_line_end:]
    assert taught.splitlines()[0] == plain.splitlines()[0]  # the task line itself is unchanged

    response_ids = tokenizer.encode("<think>ok</think><action>x</action>", add_special_tokens=False)
    student = render(state, tokenizer) + response_ids
    teacher = render(state, tokenizer, skill=skill) + response_ids
    assert student[-len(response_ids) :] == teacher[-len(response_ids) :] == response_ids
    # the chat template wraps both the same way: same opening, same generation prompt at the end
    n_common_tail = len(tokenizer.encode(plain[task_line_end + 1 :], add_special_tokens=False)) // 2
    assert student[-n_common_tail:] == teacher[-n_common_tail:]


def test_prompt_holds_task_history_observation_admissible_and_format():
    state = StepState(
        "alfworld",
        "put a mug in desk",
        "You see a desk 1.",
        ["go to desk 1", "look"],
        [("obs one", "look")],
        step_index=3,
    )
    text = render_text(state)
    assert "Your task is to: put a mug in desk" in text
    assert "already taken 3 step(s)" in text and "[Observation 3: 'obs one', Action: 'look']" in text
    assert "You are now at step 4" in text and "'go to desk 1', 'look'" in text
    assert "<think> </think>" in text and "<action> </action>" in text


@pytest.mark.parametrize(
    "response,valid,action",
    [
        ("<think>go</think><action>Go To Desk 1</action>", True, "go to desk 1"),
        ("<think>go</think><action>  go to   desk 1 </action>", True, "go to desk 1"),
        ("<action>go to desk 1</action>", False, "go to desk 1"),
        ("<think>go</think><action>fly</action>", False, "fly"),
        ("<think>a</think><action>look</action><action>look</action>", False, ""),
        ("no tags at all", False, ""),
    ],
)
def test_parse_action(response, valid, action):
    parsed = parse_action(response, ["go to desk 1", "look"])
    assert parsed.valid is valid and parsed.action == action


def test_skill_block_is_the_official_text_with_blank_lines_around():
    state = StepState("alfworld", "put a mug in desk", "You see a desk 1.", ["look"])
    text = render_text(state, skill="Find the mug first.")
    assert (
        "Your task is to: put a mug in desk\n\n**Episode-Level Skill**\nRefer to this episode-level skill when "
        "deciding what action to take in the current episode:\n[Find the mug first.]\n\n"
    ) in text


@pytest.mark.parametrize(
    "response,valid,action",
    [
        ("<think>go</think><action>Go To Desk 1</action>", True, "go to desk 1"),
        ("<think>go</think><action>fly to the moon</action>", True, "fly to the moon"),  # inadmissible: still valid
        ("<action>go to desk 1</action>", False, "go to desk 1"),  # no think pair: invalid, the action is still sent
        ("<think>去</think><action>look</action>", False, "look"),  # CJK characters
        ("<think>a</think><action>look</action><action>look</action>", True, "look"),  # the first block counts
        ("no tags at all", False, ""),
    ],
)
def test_parse_action_official_format_rule(response, valid, action):
    parsed = parse_action(response, ["go to desk 1", "look"], validity="format")
    assert parsed.valid is valid and parsed.action == action


def test_left_truncation_keeps_the_end_of_the_prompt():
    from seed.agent import left_truncate

    assert left_truncate([1, 2, 3, 4, 5], 3) == [3, 4, 5]
    assert left_truncate([1, 2], 3) == [1, 2]
    with pytest.raises(ValueError, match="format, admissible"):
        parse_action("x", [], validity="other")
