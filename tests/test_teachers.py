"""The oracle teacher on real envs: workflows from the expert, avoidance rules from concrete mistakes."""

from seed.agent import situation
from seed.envs import make
from seed.skills import parse_analysis
from seed.skills.teachers import OracleTeacher, find_mistakes
from seed.types import Episode, StepSample, StepState


def _play(env_name, seed, actions, valid=None):
    env = make(env_name)
    obs = env.reset(seed)
    steps = []
    for i, a in enumerate(actions):
        ok = True if valid is None else valid[i]
        steps.append(
            StepSample(
                StepState(env_name, obs.task, obs.text, obs.admissible),
                [1],
                [2],
                [0.0],
                f"<think>x</think><action>{a}</action>",
                a,
                ok,
                0.0,
            )
        )
        if ok:
            obs, _, done, _ = env.step(a)
    return Episode(f"{env_name}-{seed}", 0, seed, obs.task, obs.task_type, steps=steps, won=obs.won)


def test_success_gets_a_workflow_from_the_expert_plan():
    env = make("alfworld")
    env.reset(0)
    plan = env.expert_plan()
    ep = _play("alfworld", 0, plan)
    assert ep.won
    analysis = parse_analysis(OracleTeacher(lambda: make("alfworld")).label(ep))
    assert analysis.skill is not None and plan[0] in analysis.skill
    first = situation(env.reset(0).text).rstrip(".")
    assert f"when '{first}', take '{plan[0]}'" in analysis.skill  # each move keyed by the situation it is taken in


def test_failure_names_first_deviation_invalid_steps_and_loop():
    env = make("sokoban")
    env.reset(4)
    plan = env.expert_plan()
    wrong = {"up": "down", "down": "up", "left": "right", "right": "left"}[plan[0]]
    ep = _play("sokoban", 4, [wrong, "dance", wrong, wrong], valid=[True, False, True, True])
    assert not ep.won
    m = find_mistakes(make("sokoban"), ep)
    assert m.first_deviation is not None and m.first_deviation[0] == 0 and m.first_deviation[1] == wrong
    assert m.invalid_steps == [1]  # step indices as the analysis prompt shows them (0-based)
    skill = parse_analysis(OracleTeacher(lambda: make("sokoban")).label(ep)).skill
    start = situation(ep.steps[0].state.observation).rstrip(".")
    assert f"when '{start}', take '{plan[0]}', not '{wrong}'" in skill  # the mistake as a rule for its situation
    assert "invalid responses (steps 1)" in skill  # numbered as the analysis prompt numbers them
    assert len(m.deviations) == 3 and skill.count(" take '") == 2  # the first two wrong moves corrected


def test_labels_vary_with_the_episode_but_every_workflow_opens_the_same_way():
    """The rules differ per episode; the opener does not, so a small analyzer learns where a skill starts (with
    varied openers it copied the summary into the skill field instead)."""
    env = make("sokoban")
    skills = set()
    for seed in range(6):
        env.reset(seed)
        ep = _play("sokoban", seed, env.expert_plan())
        skills.add(parse_analysis(OracleTeacher(lambda: make("sokoban")).label(ep)).skill)
    assert len(skills) >= 4
    assert all(skill.startswith("What works: for ") for skill in skills)


def test_oracle_step_skills_name_the_critical_steps():
    env = make("sokoban")
    env.reset(4)
    plan = env.expert_plan()
    wrong = {"up": "down", "down": "up", "left": "right", "right": "left"}[plan[0]]
    ep = _play("sokoban", 4, ["dance", wrong, wrong], valid=[False, True, True])
    raw = OracleTeacher(lambda: make("sokoban"), step_skills=3).label(ep)
    steps = parse_analysis(raw, max_step_skills=3, num_steps=3).step_skills
    assert steps == {
        0: "Answer with one admissible action inside <action></action>.",
        1: f"Take '{plan[0]}' here, not '{wrong}'.",
    }
    assert "step_skills" not in OracleTeacher(lambda: make("sokoban")).label(ep)


def test_privileged_source_gives_the_expert_solution_whatever_the_outcome():
    from seed.skills.sources import PrivilegedAnalyzer

    env = make("sokoban")
    env.reset(3)
    plan = env.expert_plan()
    won = _play("sokoban", 3, plan)
    lost = _play("sokoban", 3, ["up", "up"])
    assert won.won and not lost.won
    results = PrivilegedAnalyzer(lambda: make("sokoban")).analyse([won, lost])
    skills = [a.skill for _, a in results]
    first = situation(env.reset(3).text).rstrip(".")
    assert skills[0] == skills[1] and skills[0].startswith(
        f"A shortest solution from the start: when '{first}', take '{plan[0]}'"
    )
    assert skills[0].count(" take '") == len(plan)


def test_a_mistake_repeated_in_one_situation_is_corrected_once():
    env = make("sokoban")
    for seed in range(50):  # a room where some non-expert move bumps into a wall (nothing changes)
        start = env.reset(seed).text
        plan = env.expert_plan()
        bump = next(
            (
                a
                for a in ("up", "down", "left", "right")
                if a != plan[0] and env.reset(seed) and env.step(a)[0].text == start
            ),
            None,
        )
        if bump:
            break
    ep = _play("sokoban", seed, [bump] * 4)
    m = find_mistakes(make("sokoban"), ep)
    assert len(m.deviations) == 4  # four wrong moves, all in the start situation
    skill = parse_analysis(OracleTeacher(lambda: make("sokoban")).label(ep)).skill
    rule = f"when '{situation(start).rstrip('.')}', take '{plan[0]}', not '{bump}'"
    assert skill.count(rule) == 1 and skill.count(" take '") == 1
    assert f"'{bump}' was repeated 4 times" in skill


def test_a_success_workflow_is_the_agents_route_without_its_detours():
    env = make("sokoban")
    for seed in range(50):  # a room where a non-expert move bumps into a wall before the expert route
        start = env.reset(seed).text
        plan = env.expert_plan()
        bump = next(
            (
                a
                for a in ("up", "down", "left", "right")
                if a != plan[0] and env.reset(seed) and env.step(a)[0].text == start
            ),
            None,
        )
        if bump and 2 <= len(plan) <= 4:
            break
    ep = _play("sokoban", seed, [bump] + plan)
    assert ep.won
    skill = parse_analysis(OracleTeacher(lambda: make("sokoban")).label(ep)).skill
    taken = [(situation(s.state.observation).rstrip("."), s.action) for s in ep.steps[1:]]
    assert skill.count(" take '") == len(plan)  # the bump (step 0) brought nothing closer: no rule for it
    for sit, move in taken:
        assert f"when '{sit}', take '{move}'" in skill  # each rule read off the step it was taken in
