"""Image observations through the renderer and a tiny random Qwen2.5-VL on the HF backend (CPU)."""

import json

import pytest
import torch

from seed.agent import render
from seed.envs import make
from seed.models import TINY_VL, HFBackend, Sampling, load_image_processor, load_model, load_tokenizer
from seed.types import Episode, StepSample, StepState


@pytest.fixture(scope="module")
def vl_tokenizer():
    return load_tokenizer(TINY_VL)


@pytest.fixture(scope="module")
def vl_backend(vl_tokenizer):
    model = load_model(TINY_VL, vl_tokenizer, seed=0)
    return HFBackend(model, vl_tokenizer, precision="fp32", seed=0, image_processor=load_image_processor(TINY_VL))


def _states(env_name: str, seeds=(0, 1, 2), **kwargs) -> list[StepState]:
    env = make(env_name, "train", **kwargs)
    return [StepState.after(env_name, env.reset(s), [], 2, 0) for s in seeds]


def test_student_and_teacher_prompts_differ_only_in_text_and_share_the_image_inputs(vl_backend, vl_tokenizer):
    state = _states("ezpoints", render="rgb")[0]
    assert len(state.images) == 1
    student = render(state, vl_tokenizer)
    teacher = render(state, vl_tokenizer, skill="Put the 2 first, then +, then the 10.")
    placeholder = vl_backend.vision.placeholder_id
    assert student.count(placeholder) == teacher.count(placeholder) == 1
    (s_ids,), s_pixels = vl_backend.vision.batch([student], [state.images])
    (t_ids,), t_pixels = vl_backend.vision.batch([teacher], [state.images])
    assert s_ids.count(placeholder) == t_ids.count(placeholder) > 1  # the same expansion of the one frame
    for key in ("pixel_values", "image_grid_thw"):
        assert torch.equal(s_pixels[key], t_pixels[key])
    response = vl_tokenizer.encode("<think>2+10</think><action>2</action>", add_special_tokens=False)
    both = vl_backend.logprobs([student, teacher], [response, response], images=[state.images, state.images])
    assert len(both[0]) == len(both[1]) == len(response)  # the same sampled ids, scored under both prompts


def test_a_text_state_renders_as_before(vl_tokenizer):
    text_state = _states("sokoban")[0]
    assert not text_state.images
    ids = render(text_state, vl_tokenizer)
    assert vl_tokenizer.convert_tokens_to_ids("<|image_pad|>") not in ids


def test_rollout_logps_are_the_scorers_and_the_image_moves_them(vl_backend, vl_tokenizer):
    states = _states("sokoban", seeds=(0, 1, 2, 3), render="rgb")
    prompts, images = [render(s, vl_tokenizer) for s in states], [s.images for s in states]
    gens = vl_backend.generate(prompts, Sampling(temperature=1.0, max_new_tokens=10, stop=()), images=images)
    assert all(len(g.ids) == 10 for g in gens)
    logps, mask, _ = vl_backend.forward_logps(prompts, [g.ids for g in gens], images=images)
    for row, gen in enumerate(gens):
        torch.testing.assert_close(logps[row, : len(gen.ids)], torch.tensor(gen.logps), atol=1e-5, rtol=1e-5)
    other = [states[1].images, states[0].images, states[3].images, states[2].images]  # the same text, other frames
    swapped, _, _ = vl_backend.forward_logps(prompts, [g.ids for g in gens], images=other)
    assert not torch.allclose(swapped * mask, logps * mask)


def test_the_vision_tower_trains(vl_backend, vl_tokenizer):
    state = _states("ezpoints", render="rgb")[0]
    response = vl_tokenizer.encode("<action>2</action>", add_special_tokens=False)
    vl_backend.model.zero_grad(set_to_none=True)
    logps, mask, _ = vl_backend.forward_logps([render(state, vl_tokenizer)], [response], images=[state.images])
    (-(logps * mask).sum()).backward()
    tower = [p for name, p in vl_backend.model.named_parameters() if "visual" in name]
    assert tower and any(p.grad is not None and p.grad.abs().sum() > 0 for p in tower)
    vl_backend.model.zero_grad(set_to_none=True)


def test_placeholders_and_images_must_match(vl_backend, vl_tokenizer):
    state = _states("ezpoints", render="rgb")[0]
    with pytest.raises(ValueError, match="1 image placeholders for 2 images"):
        vl_backend.vision.batch([render(state, vl_tokenizer)], [state.images * 2])


def test_a_text_model_refuses_images(tokenizer):
    state = _states("ezpoints", render="rgb")[0]
    with pytest.raises(ValueError, match="needs a vision-language model"):
        render(state, tokenizer)  # SmolLM2's chat template has no image parts
    backend = HFBackend(load_model("tiny-random", tokenizer), tokenizer, precision="fp32", seed=0)
    with pytest.raises(ValueError, match="text-only"):
        backend.generate([[1, 2, 3]], Sampling(max_new_tokens=2), images=[state.images])


def test_episode_files_name_the_frames_instead_of_holding_them():
    state = _states("sokoban", render="both")[0]
    step = StepSample(state, [1, 2], [3], [-0.1], "x", "up", True, 0.0)
    record = Episode("e0", 0, 0, state.task, "sokoban", steps=[step]).to_json()
    assert record["steps"][0]["state"]["images"] == ["<image 96x96>"]
    json.dumps(record)  # serialisable


def test_image_marks_place_the_frames_and_a_mismatch_is_refused():
    from seed.agent.render import user_message

    message = user_message("Step 0: <image> then Step 1: <image>", images=2)
    kinds = [part["type"] for part in message["content"]]
    assert kinds == ["text", "image", "text", "image"]
    assert [p["type"] for p in user_message("no mark", images=1)["content"]] == ["image", "text"]  # frame first
    assert user_message("plain", images=0) == {"role": "user", "content": "plain"}
    with pytest.raises(ValueError, match="marks 2 images"):
        user_message("<image><image>", images=3)


def _visual_episode(seed: int, moves: list[str]) -> Episode:
    env = make("sokoban", "train", render="rgb")
    obs, steps, history = env.reset(seed), [], []
    for i, move in enumerate(moves):
        state = StepState.after("sokoban", obs, history, 2, i)
        steps.append(StepSample(state, [1], [2], [-0.1], f"<action>{move}</action>", move, True, 0.0))
        history.append((obs.text, move))
        obs, _, _, _ = env.step(move)
    return Episode(f"e{seed}", 0, seed, obs.task, "sokoban", steps=steps)


def test_the_visual_analysis_prompt_shows_each_steps_frame(vl_backend, vl_tokenizer):
    from seed.skills.analyzer import analysis_frames, analysis_prompt
    from seed.skills.sources import PolicyAnalyzer

    episode = _visual_episode(3, ["up", "left", "down"])
    text, cut = analysis_prompt(episode)
    assert cut == 0 and text.count("Observation: <image> ") == 3
    frames = analysis_frames(episode)
    assert [f.tobytes() for f in frames] == [s.state.images[0].tobytes() for s in episode.steps]
    analyzer = PolicyAnalyzer(vl_backend, vl_tokenizer, max_new_tokens=6, batch_size=4)
    ((ids, sent),) = analyzer.requests([episode])
    assert ids.count(vl_backend.vision.placeholder_id) == 3 and len(sent) == 3
    # two episodes with the same text but other frames are analysed apart (sokoban rgb's text is the same)
    twin = _visual_episode(4, ["up", "left", "down"])
    assert analyzer.requests([twin])[0][0] == ids
    seen = []
    real = vl_backend.generate
    vl_backend_generate = lambda prompts, sampling, batch_size=64, images=None: (  # noqa: E731
        seen.append(len(prompts)) or real(prompts, sampling, batch_size, images)
    )
    analyzer.backend = type("Spy", (), {"generate": staticmethod(vl_backend_generate)})()
    results = analyzer.analyse([episode, twin, episode])
    assert seen == [2] and len(results) == 3 and results[0][0] == results[2][0]


def test_the_tiny_vl_config_runs_the_whole_seed_pipeline_on_frames(tmp_path):
    """Warm-up, oracle labels with their frames, analyzer SFT, rollouts on RGB frames, skills (the oracle's here:
    the random policy writes none that parse), teacher re-scores with the frames, the update, evaluation:
    `seed run tiny_vl`, shortened. The policy's own visual analyses are checked above."""
    from seed.cli import main
    from seed.storage import read_jsonl
    from seed.train.metrics import read_metrics

    args = ["run", "tiny_vl", f"run_dir={tmp_path}", "train.updates=1", "eval.episodes=2"]
    args += ["sft.max_new_tokens=4", "distill.coef=1.0", "distill.skill_source=teacher"]
    assert main(args) == 0
    labels = read_jsonl(tmp_path / "labels.jsonl")
    assert labels and all(len(r["frames"]) == r["prompt"].count("<image>") > 0 for r in labels)
    assert all((tmp_path / f).is_file() for r in labels for f in r["frames"])
    row = [r for r in read_metrics(tmp_path) if r["update"] == 1][0]
    assert row["distill/skill_rate"] == 1.0 and row["distill/active_token_share"] > 0
    episodes = read_jsonl(next((tmp_path / "episodes").glob("*.jsonl")))
    assert episodes and episodes[0]["steps"][0]["state"]["images"] == ["<image 96x96>"]


def test_a_vision_model_folder_loads_as_one_with_its_image_processor(tmp_path, vl_backend, vl_tokenizer):
    """A user's VLM is a local folder: it loads as an image-text model, with the processor saved beside it."""
    vl_backend.model.save_pretrained(tmp_path)
    vl_tokenizer.save_pretrained(tmp_path)
    vl_backend.image_processor.save_pretrained(tmp_path)
    tok = load_tokenizer(str(tmp_path))
    backend = HFBackend(
        load_model(str(tmp_path), tok), tok, precision="fp32", image_processor=load_image_processor(str(tmp_path))
    )
    assert backend.vision is not None and load_image_processor("tiny-random") is None
    state = _states("ezpoints", render="rgb")[0]
    prompt, response = render(state, tok), tok.encode("<action>2</action>", add_special_tokens=False)
    again = backend.logprobs([prompt], [response], images=[state.images])[0]
    first = vl_backend.logprobs([prompt], [response], images=[state.images])[0]
    assert again == pytest.approx(first, abs=1e-5)
