"""SEED inside the RL update on a tiny model: skills are re-scored on the same ids, OPD gives a gradient when
GRPO's vanishes, the skill stream is written and survives a resume."""

import json
from pathlib import Path

import pytest

from seed.config import ConfigError, load_config
from seed.train.components import build_components
from seed.train.metrics import read_metrics
from seed.train.pipeline import train_stage


def _cfg(tmp_path, *extra):
    tmp_path.mkdir(parents=True, exist_ok=True)
    library = tmp_path / "skills.yaml"
    library.write_text("default: Push the box toward the target and never walk into walls.\n")
    return load_config(
        "tiny",
        [
            f"run_dir={tmp_path / 'run'}",
            "warmup.enabled=false",
            "train.updates=1",
            "algo.kl_coef=0",
            "algo.entropy_coef=0",
            "algo.weight_decay=0",
            f"distill.library_path={library}",
            *extra,
        ],
    )


def _weight_change(cfg):
    comps = build_components(cfg)
    before = [p.detach().clone() for p in comps.policy.model.parameters()]
    train_stage(comps)
    return sum((p.detach() - b).abs().sum().item() for p, b in zip(comps.policy.model.parameters(), before))


def test_opd_moves_weights_when_every_reward_is_equal(tmp_path):
    # the tiny random model never answers validly: every episode has the same score, so GRPO's gradient is 0
    assert _weight_change(_cfg(tmp_path / "grpo")) == 0.0
    seed_cfg = _cfg(
        tmp_path / "seed",
        "distill.kind=seed",
        "distill.skill_source=library",
        "distill.coef=1.0",
        "algo.mini_batch_size=5",
    )  # padded mini-batches: the share stays at most 1
    assert _weight_change(seed_cfg) > 0.0
    row = [r for r in read_metrics(Path(seed_cfg.run_dir)) if r["update"] == 1][0]
    assert row["distill/skill_rate"] == 1.0 and row["distill/active_token_share"] == 1.0
    assert 0.0 < row["distill/gate_mean"] < 1.0 and "distill/delta_mean" in row
    assert row["time/rescore"] > 0.0


def test_skill_stream_is_written_and_restored_on_resume(tmp_path):
    cfg = _cfg(
        tmp_path, "distill.kind=seed", "distill.skill_source=teacher", "train.updates=2", "train.checkpoint_every=1"
    )
    train_stage(build_components(cfg))
    path = Path(cfg.run_dir) / "skills.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert {r["update"] for r in rows} == {1, 2}
    assert all(r["skill"] and r["outcome"] == "failure" for r in rows)  # the oracle explains each failure
    path.write_text("")  # lose the file: the checkpoint holds the stream
    train_stage(build_components(cfg))
    assert len(path.read_text().splitlines()) == len(rows)


def test_policy_analyzer_with_unparseable_output_gives_no_opd(tmp_path):
    cfg = _cfg(tmp_path, "distill.kind=seed", "distill.skill_source=policy", "distill.analyzer_max_new_tokens=8")
    train_stage(build_components(cfg))
    row = [r for r in read_metrics(Path(cfg.run_dir)) if r["update"] == 1][0]
    assert row["distill/parse_rate"] == 0.0 and row["distill/active_token_share"] == 0.0


@pytest.mark.parametrize("kind", ["opsd", "positive", "skill_sd", "opid"])
def test_peer_variants_run(tmp_path, kind):
    cfg = _cfg(tmp_path, f"distill.kind={kind}", "distill.skill_source=library")
    train_stage(build_components(cfg))
    assert any(r["update"] == 1 for r in read_metrics(Path(cfg.run_dir)))


def test_library_source_needs_a_path():
    with pytest.raises(ConfigError, match="distill.library_path"):
        load_config("tiny", ["distill.kind=seed", "distill.skill_source=library"])


def test_report_shows_updates_and_largest_delta_tokens(tmp_path, capsys):
    from seed.cli import main

    cfg = _cfg(tmp_path, "distill.kind=seed", "distill.skill_source=library")
    train_stage(build_components(cfg))
    episodes = [json.loads(x) for x in (Path(cfg.run_dir) / "episodes" / "update_00000.jsonl").read_text().splitlines()]
    step = episodes[0]["steps"][0]
    assert len(step["teacher_logps"]) == len(step["response_ids"]) == len(step["rollout_logps"])
    assert main(["report", cfg.run_dir]) == 0
    out = capsys.readouterr().out
    assert "gate" in out and "largest Δ tokens" in out and "skill: Push the box" in out


def test_teacher_signal_metrics_match_the_episode_files(tmp_path):
    """One mini-batch: every sample's first forward is at the rollout weights, so the update's shift on the
    non-action tokens is the files' teacher log-probs minus the rollout log-probs (fp32 tiny model); every step
    carries the expert's next move, replayed next to the env's expert."""
    from seed.envs import make
    from seed.skills.teachers import expert_moves
    from seed.types import Episode, StepSample, StepState

    cfg = _cfg(tmp_path, "distill.kind=seed", "distill.skill_source=teacher", "algo.mini_batch_size=256")
    train_stage(build_components(cfg))
    row = [r for r in read_metrics(Path(cfg.run_dir)) if r["update"] == 1][0]
    episodes = [json.loads(line) for line in (Path(cfg.run_dir) / "episodes" / "update_00000.jsonl").open()]
    shifts = [
        t - r
        for e in episodes
        for s in e["steps"]
        if s["teacher_logps"] is not None
        for t, r in zip(s["teacher_logps"], s["rollout_logps"])
    ]
    assert shifts and row["teacher/rest/delta"] == pytest.approx(sum(shifts) / len(shifts), abs=2e-3)
    assert row["teacher/rest/failure/delta"] == pytest.approx(row["teacher/rest/delta"])  # the tiny model never wins
    assert 0.0 <= row["teacher/rest/gate_open"] <= 1.0 and row["time/expert_replay"] >= 0.0
    env = make("sokoban")
    for e in episodes[:2]:
        steps = [
            StepSample(
                StepState(**{**s["state"], "history": [tuple(h) for h in s["state"]["history"]]}),
                [],
                s["response_ids"],
                [],
                s["response_text"],
                s["action"],
                s["valid"],
                0.0,
            )
            for s in e["steps"]
        ]
        replayed = expert_moves(env, Episode(e["episode_id"], 0, e["task_seed"], "", "", steps=steps))
        assert [s["expert_action"] for s in e["steps"]] == replayed and all(replayed)


def test_the_alfworld_cpu_config_runs_the_whole_seed_pipeline_on_the_real_engine(tmp_path):
    """The shipped ALFWorld-on-CPU run, scaled down and on the tiny random model: warm-up, oracle labels, analyzer
    SFT, both panels, one SEED update, on the real ALFWorld engine with the config's rooms and limits."""
    from seed.cli import main
    from seed.storage import read_jsonl

    shrink = ["model.name=tiny-random", "model.precision=fp32", "warmup.episodes=1", "label.tasks=1",
              "label.group_size=2", "sft.eval_generations=1", "sft.max_new_tokens=8",
              "distill.analyzer_max_new_tokens=24", "rollout.tasks_per_update=2", "rollout.group_size=2",
              "train.updates=1", "eval.episodes=2"]  # fmt: skip
    assert main(["run", "alfworld_cpu", f"run_dir={tmp_path}", *shrink]) == 0
    cfg = load_config(tmp_path / "config.yaml")
    assert (cfg.env.name, cfg.env.kwargs["task_types"], cfg.env.max_steps) == ("alfworld", ["pick_and_place_simple"], 8)
    assert load_config("alfworld_cpu").model.name == "smollm2-135m-instruct"  # the bundled model, unshrunk
    labels = read_jsonl(tmp_path / "labels.jsonl")
    assert labels and all("You are in the middle of a room" in r["prompt"] for r in labels)  # ALFWorld transcripts
    for tag in ("initial", "final"):
        panels = json.loads((tmp_path / f"eval_{tag}.json").read_text())
        assert set(panels) == {"valid_seen", "valid_unseen"}
        assert all(p["overall"]["n"] == 2 and 0.0 <= p["overall"]["success"] <= 1.0 for p in panels.values())
    updates = [r for r in read_metrics(tmp_path) if "time/rollout" in r]
    assert [r["update"] for r in updates] == [1] and {"distill/gate_mean", "distill/parse_rate"} <= set(updates[0])
