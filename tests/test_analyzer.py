"""Analysis prompt and robust JSON parsing."""

import json

import pytest

from seed.skills import analysis_prompt, parse_analysis
from seed.types import Episode, StepSample, StepState


def _episode(n_steps, won):
    steps = [
        StepSample(
            StepState("sokoban", "push the box", f"obs {i}", ["up"]),
            [1],
            [2],
            [-0.1],
            f"<think>t{i}</think><action>up</action>",
            "up",
            i % 2 == 0,
            0.0,
        )
        for i in range(n_steps)
    ]
    return Episode("e", 0, 0, "push the box", "sokoban", steps=steps, won=won)


def test_prompt_carries_outcome_and_every_step_in_full_numbered_from_zero():
    text, cut = analysis_prompt(_episode(3, won=True))
    assert cut == 0
    assert "episode_success: success" in text and "workflow" in text and "avoidance" not in text
    assert "Step 0\nObservation: obs 0\n" in text
    assert "Step 2\nObservation: obs 2\nResponse: <think>t2</think><action>up</action>\nAction valid: true" in text
    assert "return ONLY valid JSON" in text and "not as a retrospective explanation" in text
    failure, _ = analysis_prompt(_episode(2, won=False))
    assert "episode_success: failure" in failure and "avoidance rules" in failure
    long_obs = _episode(1, won=True)
    long_obs.steps[0].state.observation = "x " * 2000  # full observations: nothing is clipped
    assert ("x " * 2000).strip() in analysis_prompt(long_obs)[0]


def test_a_prompt_over_its_token_budget_leaves_out_the_earliest_steps_and_counts_them():
    words = lambda text: len(text.split())  # noqa: E731  (a stand-in token count)
    full, cut = analysis_prompt(_episode(20, won=False), max_tokens=10_000, count_tokens=words)
    assert cut == 0 and "Step 19" in full
    budget = words(full) - 30  # each step is ~6 words: about five steps must go
    text, cut = analysis_prompt(_episode(20, won=False), max_tokens=budget, count_tokens=words)
    assert words(text) <= budget and cut >= 4
    assert f"Steps 0 to {cut - 1} are left out" in text
    assert f"Step {cut}\n" in text and f"Step {cut - 1}\n" not in text and "Step 19\n" in text
    assert "episode_success: failure" in text


@pytest.mark.parametrize(
    "raw",
    [
        '{"episode_summary": "s", "episode_skill": "Push the box left before moving up."}',
        'Sure!\n```json\n{"episode_summary": "s", "episode_skill": "Push the box left before moving up."}\n```\nDone.',
        'Analysis: {"episode_summary": "s", "episode_skill": "Push the box left before moving up."} trailing {',
        '{"episode_summary": "s", "episode_skill": "Push the box left\nbefore moving up."}',  # literal newline
        "{'episode_summary': 's', 'episode_skill': 'Push the box left before moving up.'}",  # a Python dict
        '{"episode_summary": "s", "episode_skill": "Push the box left before moving up.",}',  # trailing comma
        '{"note": "first"} then {"episode_summary": "s", "episode_skill": "Push the box left before moving up."}',
    ],
)
def test_parse_keeps_what_the_official_reader_keeps(raw):
    a = parse_analysis(raw)
    assert a.parsed and a.skill == "Push the box left before moving up."


@pytest.mark.parametrize(
    "raw,error",
    [
        ("no json here", "no JSON object"),
        ('{"episode_summary": "s"}', "missing"),
        ('{"episode_summary": "s", "episode_skill": "   "}', "missing"),
    ],
)
def test_parse_rejects_unusable_output(raw, error):
    a = parse_analysis(raw)
    assert a.skill is None and error in a.error


def test_minimum_skill_length_is_a_parameter():
    raw = '{"episode_summary": "s", "episode_skill": "go left"}'
    assert parse_analysis(raw).skill == "go left"  # official RL path: any non-empty skill
    assert "shorter than 5 words" in parse_analysis(raw, min_skill_words=5).error


def test_step_skills_are_asked_for_only_when_enabled():
    plain, _ = analysis_prompt(_episode(3, won=False))
    with_steps, _ = analysis_prompt(_episode(3, won=False), step_skills=2)
    assert "step_skills" not in plain and "complete 2 fields" in plain
    assert '"step_skills": {"0": "skill for step 0"}' in with_steps and "at most 2 critical step(s)" in with_steps


def test_step_skills_keep_steps_of_the_episode_only_up_to_the_limit():
    raw = (
        '{"episode_summary": "s", "episode_skill": "Push the box left before moving up.", "step_skills": '
        '{"0": "Move left toward the box.", "Step 1": "Push the box down now.", "9": "Out of range step.", '
        '"x": "Not a step number.", "2": "too short"}}'
    )
    assert parse_analysis(raw).step_skills == {}  # off unless asked for
    a = parse_analysis(raw, max_step_skills=4, num_steps=3)
    assert a.step_skills == {0: "Move left toward the box.", 1: "Push the box down now."}
    assert parse_analysis(raw, max_step_skills=1, num_steps=3).step_skills == {0: "Move left toward the box."}


def test_policy_analyzer_decodes_each_distinct_prompt_once(tokenizer):
    from seed.agent import prompt_ids
    from seed.models import HFBackend, load_model
    from seed.skills.sources import PolicyAnalyzer

    backend = HFBackend(load_model("tiny-random", tokenizer), tokenizer, precision="fp32", seed=0)
    decoded = []
    generate = backend.generate
    backend.generate = lambda prompts, sampling, batch_size=64, images=None: (
        decoded.extend(prompts),
        generate(prompts, sampling, batch_size, images),
    )[1]
    analyzer = PolicyAnalyzer(backend, tokenizer, max_new_tokens=6, batch_size=8)
    episodes = [_episode(2, won=True), _episode(3, won=False), _episode(2, won=True)]
    results = analyzer.analyse(episodes)
    assert len(decoded) == 2 and len(results) == 3
    assert results[0][0] == results[2][0]  # the repeated episode gets the text of its twin
    alone = generate([prompt_ids(tokenizer, analysis_prompt(episodes[1])[0])], analyzer.sampling)[0]
    assert results[1][0] == alone.text  # and the others stay in their place


def test_skill_first_asks_for_the_skill_before_the_summary_and_trains_it_first():
    from seed.train.analyzer_sft import sft_target

    plain, _ = analysis_prompt(_episode(3, won=True))
    first, _ = analysis_prompt(_episode(3, won=True), skill_first=True)
    assert plain.index('"episode_summary": "string"') < plain.index('"episode_skill": "string"')
    assert first.index('"episode_skill": "string"') < first.index('"episode_summary": "string"')
    assert first.index("1. Write one episode_skill") < first.index("2. Write a concise episode_summary.")
    assert first.replace("episode_skill", "X").count("X") == plain.replace("episode_skill", "X").count("X")
    analysis = parse_analysis('{"episode_summary": "Won.", "episode_skill": "Push up."}')
    target = sft_target(analysis, skill_first=True)
    assert target == '{"episode_skill": "Push up.", "episode_summary": "Won."}'
    assert parse_analysis(target) == analysis  # the reader takes either order


def test_a_skill_complete_before_the_token_limit_cut_the_object_is_kept():
    """A greedy analyzer that writes the skill first and then loops in the summary hits the token limit inside
    the object: its complete skill string is kept; an unfinished skill, or an object that closes but does not
    decode, gives none."""
    skill = "What works: when 'The box is 1 step up from you', take 'up'."
    cut = json.dumps({"episode_skill": skill, "episode_summary": "What works: when 'The box is"})[:-20]
    assert parse_analysis(cut).skill == skill and parse_analysis(cut).summary == ""
    assert parse_analysis(cut + ' "step_skills": {"0": "go up').skill == skill
    assert parse_analysis('{"episode_skill": "What works: when \'The box').skill is None
    assert parse_analysis('{"episode_skill": "' + skill + '", "episode_summary": ' + "7" * 5000 + "}").skill is None
    assert (
        parse_analysis('prose, then {"episode_summary": "x", "episode_skill": "Esc\\"aped rule here."').skill
        == 'Esc"aped rule here.'
    )
