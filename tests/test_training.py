"""The RL loop on a tiny random model: updates change weights, resume never repeats an update, files are real."""

import json
from pathlib import Path

import pytest
import torch

from seed.config import CONFIG_DIR, ConfigError, load_config
from seed.storage import read_jsonl
from seed.train.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint
from seed.train.components import build_components
from seed.train.metrics import read_metrics
from seed.train.pipeline import train_stage
from seed.train.rl import compute_advantages, rollout_stats, task_seeds_for_update
from seed.types import Episode, StepSample, StepState


def _cfg(tmp_path, *extra):
    return load_config("tiny", [f"run_dir={tmp_path / 'run'}", *extra])


def test_bad_config_names_key_and_allowed_values():
    with pytest.raises(ConfigError, match=r"'algo.advantage'.*allowed: grpo, gigpo"):
        load_config("tiny", ["algo.advantage=ppo"])
    with pytest.raises(ConfigError, match=r"unknown config key 'rollout.groupsize'"):
        load_config("tiny", ["rollout.groupsize=4"])
    with pytest.raises(ConfigError, match=r"'rollout.group_size' = 0 must be >= 1"):
        load_config("tiny", ["rollout.group_size=0"])
    with pytest.raises(ConfigError, match="shipped configs"):
        load_config("no-such-config")


def test_shipped_configs_validate():
    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        load_config(path.stem)
    seed_recipe = load_config("alfworld_seed_qwen2.5-3b")
    assert (seed_recipe.distill.kind, seed_recipe.distill.coef, seed_recipe.distill.beta) == ("seed", 0.01, 5.0)
    assert (seed_recipe.sft.epochs, seed_recipe.sft.lr, seed_recipe.label.tasks) == (3, 5e-6, 180)
    paper = load_config("alfworld_grpo_qwen2.5-3b")
    assert (paper.rollout.tasks_per_update, paper.rollout.group_size, paper.env.max_steps) == (16, 8, 30)
    assert (paper.algo.lr, paper.algo.kl_coef, paper.algo.entropy_coef, paper.train.updates) == (1e-6, 0.01, 0.001, 150)


def _episode(eid, group, score, n_steps):
    st = StepState("sokoban", "t", "o", ["up"])
    steps = [StepSample(st, [1], [2, 3], [-0.1, -0.2], "", "up", True, 0.0, eid, group, i) for i in range(n_steps)]
    return Episode(eid, group, 0, "t", "sokoban", steps=steps, score=score)


def test_advantages_per_step_and_faulty_episodes_are_dropped():
    eps = [_episode("a", 0, 10.0, 2), _episode("b", 0, 0.0, 3), _episode("c", 1, 5.0, 1)]
    broken = _episode("d", 1, 0.0, 2)
    broken.error = "step failed"
    by_episode = compute_advantages(eps + [broken], load_config("tiny", ["algo.grpo_over=episodes"]))
    assert len(by_episode.samples) == 6
    a = by_episode.advantages.tolist()
    assert a[0] == a[1] > 0 and a[2] == a[3] == a[4] < 0 and a[5] == 0.0  # "c" is alone in its group now
    by_step = compute_advantages(eps + [broken], load_config("tiny"))  # official: statistics over step samples
    b = by_step.advantages.tolist()
    assert b[0] == b[1] > 0 and b[2] == b[3] == b[4] < 0
    assert b[5] == pytest.approx(5.0, rel=1e-5)  # a group with one score: mean 0, std 1
    assert [s.advantage for s in by_step.samples] == pytest.approx(b)  # each step keeps its own, for the files


def test_invalid_advantage_nonpositive_caps_only_invalid_steps():
    won = _episode("a", 0, 10.0, 2)
    won.steps[1].valid = False  # broke the format, yet its episode won
    eps = [won, _episode("b", 0, 0.0, 2)]
    official = compute_advantages(eps, load_config("tiny")).advantages.tolist()
    assert rollout_stats(eps)["rollout/invalid_reinforced"] == 1  # logged with every update
    capped = compute_advantages(eps, load_config("tiny", ["algo.invalid_advantage=nonpositive"]))
    assert rollout_stats(eps)["rollout/invalid_reinforced"] == 0
    assert official[1] > 0 and capped.advantages.tolist() == pytest.approx([official[0], 0.0, *official[2:]])
    assert capped.samples[1].advantage == 0.0  # the episode files record what the update trained with
    with pytest.raises(ConfigError, match=r"'algo.invalid_advantage'.*allowed: keep, nonpositive"):
        load_config("tiny", ["algo.invalid_advantage=clip"])


def test_task_seeds_never_overlap_between_updates():
    cfg = load_config("tiny")
    seen = set()
    for u in range(5):
        seeds = task_seeds_for_update(cfg, u)
        assert not seen & set(seeds)
        seen |= set(seeds)


def test_train_updates_weights_writes_files_and_resumes(tmp_path):
    cfg = _cfg(tmp_path)
    comps = build_components(cfg)
    before = {k: v.clone() for k, v in comps.policy.model.state_dict().items()}
    train_stage(comps)
    run = Path(cfg.run_dir)
    after = comps.policy.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    rows = read_metrics(run)
    assert [r["update"] for r in rows if "time/rollout" in r] == [1, 2]
    assert all("rollout/success" in r and "time/update" in r for r in rows if r["update"] > 0)
    episodes = [json.loads(line) for line in (run / "episodes" / "update_00001.jsonl").read_text().splitlines()]
    assert len(episodes) == cfg.rollout.tasks_per_update * cfg.rollout.group_size
    assert all(len(e["steps"]) >= 1 and "response_ids" in e["steps"][0] for e in episodes)
    # every step carries the advantage it was trained with; by hand from the file's own scores (steps rule)
    scores = [
        (e["group_id"], 10.0 * e["won"] - 0.1 * (not s["valid"]), s["advantage"]) for e in episodes for s in e["steps"]
    ]
    for group in {g for g, _, _ in scores}:
        xs = [x for g, x, _ in scores if g == group]
        mean = sum(xs) / len(xs)
        std = (sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5 if len(xs) > 1 else 1.0
        expected = [(x - (mean if len(xs) > 1 else 0.0)) / (std + 1e-6) for x in xs]
        assert [a for g, _, a in scores if g == group] == pytest.approx(expected, abs=1e-4)
    assert all(
        e["steps"][0]["response_ids"][-1] == comps.tokenizer.eos_token_id
        for e in episodes
        if len(e["steps"][0]["response_ids"]) < cfg.rollout.max_response_tokens
    )
    ckpt = load_checkpoint(latest_checkpoint(run))
    assert ckpt["update"] == 2 and set(ckpt) >= {"model", "optimizer", "rng", "update", "config"}
    assert not list((run / "checkpoints").glob("*.tmp"))

    # the same command on the same run directory: nothing is repeated
    comps2 = build_components(_cfg(tmp_path))
    train_stage(comps2)
    assert [r["update"] for r in read_metrics(run) if "time/rollout" in r] == [1, 2]

    # asking for more updates continues from update 2, with update 2's weights
    comps3 = build_components(_cfg(tmp_path, "train.updates=3"))
    train_stage(comps3)
    assert [r["update"] for r in read_metrics(run) if "time/rollout" in r] == [1, 2, 3]
    assert [p.name for p in list_checkpoints(run)][-1] == "update_00003.pt"


def test_resume_after_a_crash_redoes_only_the_lost_update(tmp_path):
    cfg = _cfg(tmp_path, "train.updates=2", "train.checkpoint_every=1", "train.keep_checkpoints=5")
    train_stage(build_components(cfg))
    run = Path(cfg.run_dir)
    (run / "checkpoints" / "update_00002.pt").unlink()  # as if killed after logging update 2
    train_stage(build_components(cfg))
    assert [r["update"] for r in read_metrics(run) if "time/rollout" in r] == [1, 2]


def test_the_checkpoint_resumed_from_is_not_held_through_the_updates(tmp_path, monkeypatch):
    """Its weights (and AdamW's moments) are copied into the model and the optimizer; a copy kept alive would add
    their size to the memory of every later phase."""
    import gc
    import weakref

    from seed.train import rl

    cfg = _cfg(tmp_path, "train.updates=1", "warmup.enabled=false")
    train_stage(build_components(cfg))
    loaded: list[weakref.ref] = []
    load = rl.load_latest_checkpoint

    def tracked_load(*args, **kwargs):
        path, state = load(*args, **kwargs)
        loaded.extend(weakref.ref(t) for t in state["model"].values())
        return path, state

    alive_at_update: list[int] = []
    update = rl.policy_update

    def checked_update(*args, **kwargs):
        gc.collect()
        alive_at_update.append(sum(ref() is not None for ref in loaded))
        return update(*args, **kwargs)

    monkeypatch.setattr(rl, "load_latest_checkpoint", tracked_load)
    monkeypatch.setattr(rl, "policy_update", checked_update)
    assert train_stage(build_components(_cfg(tmp_path, "train.updates=2", "warmup.enabled=false"))) == 2
    assert loaded and alive_at_update == [0]


def _same_weights(model, weights) -> bool:
    mine = model.state_dict()
    return set(mine) == set(weights) and all(torch.equal(mine[k], weights[k].to(mine[k].dtype)) for k in weights)


def test_the_kl_reference_is_built_after_the_start_stages_from_the_start_point(tmp_path, monkeypatch):
    from seed.storage import load_verified
    from seed.train import pipeline

    sft = ["sft.enabled=true", "label.tasks=2", "label.group_size=2", "sft.eval_generations=1", "sft.max_new_tokens=4"]
    cfg = _cfg(tmp_path, "train.updates=1", *sft)
    comps = build_components(cfg)
    assert comps.wants_reference and comps.reference is None
    during = {}
    start_stage = pipeline._start_stage
    monkeypatch.setattr(
        pipeline,
        "_start_stage",
        lambda c, name, fn: start_stage(c, name, lambda: (during.update({name: c.reference}), fn())[1]),
    )
    train_stage(comps)
    assert during == {"warmup": None, "sft": None}  # each start stage trains without a frozen copy beside the model
    assert _same_weights(comps.reference.model, load_verified(Path(cfg.run_dir) / "reference.pt")["model"])
    assert not any(p.requires_grad for p in comps.reference.model.parameters())


def test_without_start_stages_the_reference_is_the_model_as_loaded(tmp_path):
    from seed.models import load_model
    from seed.train.pipeline import load_reference

    plain = build_components(_cfg(tmp_path, "warmup.enabled=false", "train.updates=1"))
    assert plain.reference is not None  # built at once: nothing will change the start point
    as_loaded = load_model(plain.cfg.model.name, plain.tokenizer, seed=plain.cfg.seed).state_dict()
    train_stage(plain)
    assert _same_weights(plain.reference.model, as_loaded)
    # warm-up switched on after RL began: no stage ran, so the reference is still the model as loaded
    late = build_components(_cfg(tmp_path, "train.updates=1"))
    late.policy.model.load_state_dict(plain.policy.model.state_dict())
    rng = torch.get_rng_state()
    load_reference(late)
    assert _same_weights(late.reference.model, as_loaded) and torch.equal(torch.get_rng_state(), rng)


def test_an_offloaded_reference_is_freed_between_updates_and_trains_the_same(tmp_path, monkeypatch):
    from seed.storage import load_verified
    from seed.train import rl

    kept = build_components(_cfg(tmp_path / "kept", "train.updates=2"))
    offloaded = build_components(_cfg(tmp_path / "offloaded", "train.updates=2", "model.offload_reference=true"))
    train_stage(kept)
    freed_at_update = []
    update = rl.policy_update

    def checked_update(components, *args, **kwargs):
        freed_at_update.append(all(p.is_meta for p in components.reference.model.parameters()))
        return update(components, *args, **kwargs)

    monkeypatch.setattr(rl, "policy_update", checked_update)
    train_stage(offloaded)
    assert freed_at_update == [False, True]  # loaded for the first update, freed from its pass to the next
    assert all(p.is_meta for p in offloaded.reference.model.parameters())  # freed after the last update's pass
    assert not any(p.is_meta for p in kept.reference.model.parameters())
    before, after = kept.policy.model.state_dict(), offloaded.policy.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # the KL term saw the same reference
    reference = offloaded.scoring_reference()  # read back from reference.pt
    assert _same_weights(reference.model, load_verified(Path(offloaded.cfg.run_dir) / "reference.pt")["model"])


def test_gigpo_trains(tmp_path):
    cfg = _cfg(tmp_path, "algo.advantage=gigpo", "train.updates=1", "warmup.enabled=false")
    assert train_stage(build_components(cfg)) == 1


def test_warmup_refuses_answers_longer_than_the_response_budget(tmp_path):
    cfg = _cfg(tmp_path, "rollout.max_response_tokens=8")
    with pytest.raises(ConfigError, match="rollout.max_response_tokens=8"):
        train_stage(build_components(cfg))


def test_eval_every_evaluates_during_training_without_changing_it(tmp_path):
    plain = _cfg(tmp_path / "a", "train.updates=2", "eval.episodes=2", "eval.splits=[valid_seen]")
    evaluated = _cfg(tmp_path / "b", "train.updates=2", "eval.episodes=2", "eval.splits=[valid_seen]", "eval.every=1")
    train_stage(build_components(plain))
    train_stage(build_components(evaluated))
    run_a, run_b = Path(plain.run_dir), Path(evaluated.run_dir)
    assert json.loads((run_b / "eval_update_00001.json").read_text())["valid_seen"]["overall"]["n"] == 2
    assert (run_b / "eval_update_00002.json").exists() and not (run_a / "eval_update_00001.json").exists()
    rows = [r for r in read_metrics(run_b) if r["update"] > 0]
    assert all("eval/valid_seen/success" in r for r in rows)
    ids = [
        [s["response_ids"] for e in read_jsonl(run / "episodes" / "update_00001.jsonl") for s in e["steps"]]
        for run in (run_a, run_b)
    ]
    assert ids[0] == ids[1]  # update 2 (episodes/update_00001) after an evaluation: the generator was put back


def _count_calls(obj, name: str) -> list:
    """Record each call of `obj.<name>` (its first argument's length) and let it through."""
    calls, method = [], getattr(obj, name)

    def counted(*args, **kwargs):
        calls.append(len(args[0]))
        return method(*args, **kwargs)

    setattr(obj, name, counted)
    return calls


def test_old_logprobs_from_the_rollout_train_as_a_recompute_does_in_fp32(tmp_path):
    """The sampler's temperature-1 log-probs are the pre-update policy's: with several mini-batches an update that
    takes them reaches the weights a recomputing update reaches, without the policy's extra no-grad pass."""
    import dataclasses

    from seed.train.optim import make_optimizer
    from seed.train.rl import policy_update

    comps = build_components(_cfg(tmp_path, "warmup.enabled=false", "algo.mini_batch_size=2"))
    cfg = comps.cfg
    seeds = task_seeds_for_update(cfg, 0)
    episodes = comps.collector("train").collect(comps.rollout_backend(), seeds, 2, comps.rollout_sampling())
    batch = compute_advantages(episodes, cfg)
    batch.advantages = torch.linspace(-1.0, 1.0, len(batch.samples))  # every sample pulls: the ratio matters
    shifted = dataclasses.replace(
        batch, samples=[dataclasses.replace(s, rollout_logps=[x + 0.3 for x in s.rollout_logps]) for s in batch.samples]
    )
    start = {k: v.clone() for k, v in comps.policy.model.state_dict().items()}
    trained = {}
    for name, source, b in (
        ("recompute", "recompute", batch),
        ("rollout", "rollout", batch),
        ("off", "rollout", shifted),
    ):
        comps.policy.model.load_state_dict(start)
        cfg.algo.old_logprobs = source
        calls = _count_calls(comps.policy, "logprobs")
        stats = policy_update(comps, make_optimizer(comps.policy.model, cfg), b)
        del comps.policy.logprobs  # the counting wrapper
        trained[name] = ({k: v.clone() for k, v in comps.policy.model.state_dict().items()}, calls, stats)
    (recomputed, calls_r, stats_r), (taken, calls_t, stats_t) = trained["recompute"], trained["rollout"]
    assert stats_r["train/optimizer_steps"] > 1 and len(calls_r) == 1 and calls_t == []
    assert (stats_r["train/old_logprobs_from_rollout"], stats_t["train/old_logprobs_from_rollout"]) == (0.0, 1.0)
    assert any(not torch.allclose(recomputed[k], start[k], atol=1e-4) for k in start)  # the update moved the weights
    for k in start:
        torch.testing.assert_close(taken[k], recomputed[k], atol=1e-6, rtol=1e-5)
    off = trained["off"][0]  # log-probs that are not the policy's train to other weights
    assert any(not torch.allclose(off[k], recomputed[k], atol=1e-5) for k in start)


def test_auto_takes_rollout_logprobs_only_where_they_equal_a_recompute(tmp_path):
    from seed.train.rl import old_logprobs_source, rollout_old_logprobs

    fp32 = build_components(_cfg(tmp_path / "a", "algo.old_logprobs=auto"))
    assert old_logprobs_source(fp32) == "rollout"
    assert old_logprobs_source(fp32, dp=object()) == "recompute"  # a data-parallel replica decoded the rollout
    bf16 = build_components(_cfg(tmp_path / "b", "algo.old_logprobs=auto", "model.precision=bf16"))
    assert old_logprobs_source(bf16) == "recompute"  # the bf16 decoding copy rounds otherwise
    for choice in ("recompute", "rollout"):
        assert old_logprobs_source(build_components(_cfg(tmp_path / choice, f"algo.old_logprobs={choice}"))) == choice
    # a sample without its sampler log-probs is scored by the policy; the others keep theirs
    st = StepState("sokoban", "t", "o", ["up"])
    kept = StepSample(st, [5, 6, 7], [8, 9], [-0.5, -0.25], "", "up", True, 0.0)
    bare = StepSample(st, [5, 6, 7], [10, 11, 12], [], "", "up", True, 0.0)
    old = rollout_old_logprobs(fp32.policy, [kept, bare], token_budget=4096)
    assert old[0] == [-0.5, -0.25]
    assert old[1] == pytest.approx(fp32.policy.logprobs([[5, 6, 7]], [[10, 11, 12]])[0], abs=1e-6)
