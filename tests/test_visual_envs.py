"""Image observations: EZPoints (cards) and Sokoban's RGB frames; experts, splits, invalid moves, determinism."""

import pytest

from seed.envs import make
from seed.envs.base import argument_choices
from seed.envs.ezpoints import RANKS, SUITS, TOKENS, UNSEEN_RANK_PAIRS, card_value, deal, evaluate
from seed.envs.sokoban import COLOURS, RENDER_MODES


def _play(env, seed: int) -> bool:
    env.reset(seed)
    done, info = False, {}
    for action in env.expert_plan():
        _, _, done, info = env.step(action)
        assert info["valid"]
    return done and info.get("won", False)


@pytest.mark.parametrize("split", ["train", "valid_seen", "valid_unseen"])
def test_the_ezpoints_expert_wins_every_panel_task(split):
    env = make("ezpoints", split)
    assert all(_play(env, seed) for seed in range(64))


def test_ezpoints_deals_make_twelve_and_unseen_pairs_stay_out_of_training():
    for split in ("train", "valid_seen", "valid_unseen"):
        pairs = {(a[0], b[0]) for a, b in (deal(split, s) for s in range(400))}
        assert all(card_value(a) + card_value(b) == 12 or card_value(a) * card_value(b) == 12 for a, b in pairs)
        assert all(r in RANKS for pair in pairs for r in pair)
        if split == "valid_unseen":
            assert pairs == set(UNSEEN_RANK_PAIRS)
        else:
            assert not pairs & set(UNSEEN_RANK_PAIRS) and len(pairs) == 15
    assert {s for a, b in (deal("train", s) for s in range(400)) for s in (a[1], b[1])} == set(SUITS)
    assert [deal("train", s) for s in range(20)] == [deal("train", s) for s in range(20)]
    assert [deal("train", s) for s in range(20)] != [deal("valid_seen", s) for s in range(20)]


def test_ezpoints_flags_tokens_that_cannot_follow_and_leaves_the_formula_alone():
    env = make("ezpoints", "train")
    env.reset(0)
    a, b = env.numbers
    off_card = next(t for t in TOKENS[:10] if int(t) not in (a, b))
    for bad in ("+", "*", off_card, "11", "two"):
        _, _, done, info = env.step(bad)
        assert not info["valid"] and not done and env.formula == []
    env.step(str(a))
    for bad in (str(b), str(a) if a != b else off_card):  # two numbers in a row
        _, _, _, info = env.step(bad)
        assert not info["valid"] and env.formula == [str(a)]
    wrong = "*" if a + b == 12 else "+"
    env.step(wrong)
    assert env.expert_plan() == []  # no winning formula from here
    env.step(str(b))
    _, reward, done, info = env.step("=")
    assert done and not info["won"] and reward == 0.0
    assert env.expert_plan() == [] and not env.step("=")[3]["valid"]  # evaluated: nothing more to append


def test_evaluate_needs_both_card_numbers_once():
    assert evaluate(["2", "+", "10"], (10, 2)) and evaluate(["3", "*", "4"], (3, 4))
    assert not evaluate(["6", "+", "6"], (6, 2)) and not evaluate(["2", "*", "10"], (2, 10))
    assert not evaluate(["2", "+"], (2, 10))


def test_ezpoints_rgb_shows_the_cards_only_in_the_image():
    text, rgb, both = (make("ezpoints", "valid_seen", render=m).reset(3) for m in ("text", "rgb", "both"))
    assert not text.images and len(rgb.images) == 1 and len(both.images) == 1
    (left, _), (right, _) = deal("valid_seen", 3)
    assert f"['{left}', '{right}']" in text.text and f"['{left}', '{right}']" in both.text
    assert not any(ch.isdigit() for ch in rgb.text)  # the numbers are not in the words
    image = rgb.images[0]
    assert image.mode == "RGB" and image.size == (152, 112)
    again = make("ezpoints", "valid_seen", render="rgb").reset(3).images[0]
    assert image.tobytes() == again.tobytes()  # a task's frame is a function of (split, seed)
    assert rgb.admissible == list(TOKENS)  # the vocabulary, not the cards: admissible actions do not leak them


def test_the_render_choices_are_checked_by_the_registry():
    assert argument_choices("ezpoints")["render"] == RENDER_MODES == argument_choices("sokoban")["render"]
    with pytest.raises(ValueError, match="render='svg'"):
        make("sokoban", "train", render="svg")


def test_sokoban_frames_show_the_room_and_text_mode_is_unchanged():
    text_env, rgb_env = make("sokoban", "train"), make("sokoban", "train", render="rgb")
    plain, frame_obs = text_env.reset(11), rgb_env.reset(11)
    assert not plain.images and "#" in plain.text and "#" not in frame_obs.text
    room, frame, cell = rgb_env.room, frame_obs.images[0], 16
    assert frame.size == (room.size * cell, room.size * cell)
    centre = lambda p: (p[1] * cell + cell // 2, p[0] * cell + cell // 2)  # noqa: E731
    assert frame.getpixel(centre(room.player)) == COLOURS["player"]
    for box in room.boxes:
        assert frame.getpixel(centre(box)) == COLOURS["box_on_target" if box in room.targets else "box"]
    assert frame.getpixel(centre(next(iter(room.walls)))) == COLOURS["wall"]
    assert _play(rgb_env, 11)
    rgb_env.reset(11)
    before = rgb_env._obs().images[0].tobytes()
    move = rgb_env.expert_plan()[0]
    after, _, _, _ = rgb_env.step(move)
    assert after.images[0].tobytes() != before  # the frame follows the moves


def _episode(env_name: str, seed: int, moves: list[str], **kwargs):
    from seed.types import Episode, StepSample, StepState

    env = make(env_name, "train", **kwargs)
    obs, steps, history = env.reset(seed), [], []
    for i, move in enumerate(moves):
        state = StepState.after(env_name, obs, history, 2, i)
        steps.append(StepSample(state, [1], [2], [-0.1], f"<action>{move}</action>", move, True, 0.0))
        history.append((obs.text, move))
        obs, _, done, _ = env.step(move)
        if done:
            break
    return Episode(f"{env_name}-{seed}", 0, seed, obs.task, env_name, steps=steps, won=obs.won)


@pytest.mark.parametrize("env_name", ["sokoban", "ezpoints"])
def test_the_oracle_labels_visual_episodes_in_words(env_name):
    import functools
    import json

    from seed.skills.teachers import OracleTeacher

    oracle = OracleTeacher(functools.partial(make, env_name, split="train", render="text"))
    expert = make(env_name, "train")
    expert.reset(5)
    moves = expert.expert_plan()
    won = _episode(env_name, 5, moves, render="rgb")
    assert won.won
    skill = json.loads(oracle.label(won))["episode_skill"]
    assert skill.startswith("What works:") and "shown in the image" not in skill
    words = _episode(env_name, 5, moves, render="text")
    assert json.loads(oracle.label(words))["episode_skill"] == skill  # frames or words: the same rules
    wrong = "left" if env_name == "sokoban" else "*"  # ezpoints: "*" again where a number must follow, never "="
    lost = _episode(env_name, 5, [moves[0], wrong, wrong, wrong], render="rgb")
    assert not lost.won
    assert json.loads(oracle.label(lost))["episode_skill"].startswith("Warning:")
