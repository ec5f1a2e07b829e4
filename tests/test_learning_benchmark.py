"""The learning benchmark's statistics (benchmarks/learning.py), on curves whose answers can be worked by hand."""

import importlib
import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
learning = importlib.import_module("learning")


def _table(per_method: dict[str, dict[int, list[float]]]) -> dict:
    """curves[method]['all'][update] = per-seed successes -> summarise's table (4 episodes per update)."""
    curves = {m: {"all": {u: dict(enumerate(v)) for u, v in pts.items()}} for m, pts in per_method.items()}
    seeds = list(range(len(next(iter(next(iter(per_method.values())).values())))))
    return learning.summarise(curves, seeds, episodes_per_update=4)


def test_episodes_to_reach_interpolates_between_evaluation_points():
    assert learning.episodes_to_reach([(0, 0.2), (12, 0.4), (24, 0.8)], 0.6) == pytest.approx(18.0)
    assert learning.episodes_to_reach([(0, 0.5), (12, 0.4)], 0.5) == 0.0  # the start already reaches it
    assert learning.episodes_to_reach([(0, 0.2), (12, 0.4)], 0.5) == math.inf


def test_paired_difference_is_the_mean_and_se_of_per_seed_differences():
    table = _table({"grpo": {0: [0.3, 0.4, 0.5], 6: [0.4, 0.5, 0.6]}, "seed": {0: [0.3, 0.4, 0.5], 6: [0.5, 0.7, 0.6]}})
    d = learning.paired_minus(table, "seed")["all"]
    assert d["update"] == 6 and d["n_seeds"] == 3
    assert d["mean"] == pytest.approx(0.1)  # differences 0.1, 0.2, 0.0
    assert d["se"] == pytest.approx(0.1 / math.sqrt(3))  # their sample SD is 0.1


def test_reach_grpo_final_point_estimate_and_interval():
    table = _table(
        {
            "grpo": {0: [0.2, 0.2, 0.2, 0.2], 6: [0.4, 0.4, 0.4, 0.4]},
            "seed": {0: [0.2, 0.2, 0.2, 0.2], 3: [0.4, 0.4, 0.4, 0.4], 6: [0.6, 0.6, 0.6, 0.6]},
            "gigpo": {0: [0.2, 0.2, 0.2, 0.2], 6: [0.3, 0.3, 0.3, 0.3]},
        }
    )
    reach = learning.reach_grpo_final(table, resamples=200)
    assert reach["grpo_final_success"] == pytest.approx(0.4)
    assert reach["methods"]["grpo"]["episodes"] == 24.0  # 6 updates x 4 episodes
    assert reach["methods"]["seed"] == {
        "episodes": 12.0,
        "interval_95": [12.0, 12.0],
        "share_of_resamples_never_reaching": 0.0,
    }
    assert reach["methods"]["gigpo"]["episodes"] is None
    assert reach["methods"]["gigpo"]["share_of_resamples_never_reaching"] == 1.0


def test_every_method_but_seed_sfw_shares_the_plain_start_point():
    assert {learning.start_of(m) for m in learning.METHODS if m != "seed_sfw"} == {"start"}
    assert learning.start_of("seed_sfw") == "start_sfw"
    assert "warmup.skill_share=0" in learning.START_POINTS["start"]


def _metrics(run_dir: Path, rates: list[float]) -> None:
    """A run's metrics.jsonl: a stage row (no invalid rate), then the updates' rows out of order."""
    rows = [{"update": 0, "warmup/samples": 10}] + [
        {"update": u, "rollout/invalid_rate": r} for u, r in reversed(list(enumerate(rates, start=1)))
    ]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_invalid_rates_per_update_and_the_table_of_maxima(tmp_path):
    _metrics(tmp_path / "seed0" / "grpo", [0.05, 0.25])
    _metrics(tmp_path / "seed1" / "grpo", [0.0, 0.1, 0.02])
    assert learning.invalid_rates(tmp_path / "seed0" / "grpo") == [0.05, 0.25]
    table = learning.invalid_table(tmp_path, seeds=[0, 1, 2], methods=["grpo", "seed"])
    assert table == {
        "grpo": {"0": {"invalid_rate": [0.05, 0.25], "max": 0.25}, "1": {"invalid_rate": [0.0, 0.1, 0.02], "max": 0.1}}
    }
    # a collapse in the last update shows in the evaluation after it only
    for update, rate in ((0, 0.0), (3, 0.01), (6, 0.66)):
        panels = {"valid_seen": {"invalid_rate": rate}, "valid_unseen": {"invalid_rate": rate / 2}}
        (tmp_path / "seed0" / "grpo" / f"eval_update_{update:05d}.json").write_text(json.dumps(panels))
    row = learning.invalid_table(tmp_path, seeds=[0], methods=["grpo"])["grpo"]["0"]
    assert row["max"] == 0.25 and row["eval"] == {"0": 0.0, "3": 0.01, "6": 0.66} and row["eval_max"] == 0.66
    assert "reinforced" not in row  # the run predates rollout/invalid_reinforced


def test_reinforced_invalid_steps_are_summed_only_where_every_update_logged_them(tmp_path):
    run = tmp_path / "seed0" / "seed"
    rows = [
        {"update": 0},
        *(
            {"update": u, "rollout/invalid_rate": 0.0, "rollout/invalid_reinforced": n}
            for u, n in ((1, 0), (2, 1), (3, 2))
        ),
    ]
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert learning.reinforced_invalid(run) == 3
    assert learning.invalid_table(tmp_path, seeds=[0], methods=["seed"])["seed"]["0"]["reinforced"] == 3
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in [*rows, {"update": 4, "rollout/invalid_rate": 0.1}])
    )
    assert learning.reinforced_invalid(run) is None  # an update without the metric: unknown, not 0


def test_collapse_counts_the_learning_benchmarks_runs_of_the_default_recipe(tmp_path, monkeypatch):
    collapse = importlib.import_module("collapse")
    monkeypatch.setattr(collapse, "ARCHIVE", tmp_path / "collapse_runs")
    monkeypatch.setattr(learning, "ARCHIVE", tmp_path / "learning_runs")
    _metrics(tmp_path / "learning_runs" / "seed3" / "seed_sfw", [0.0] * 6)
    _metrics(tmp_path / "learning_runs" / "seed3" / "grpo", [0.3] * 6)
    _metrics(collapse.run_dir_of(collapse.ARCHIVE, 3, "start", "default", "grpo"), [0.1] * 6)
    # SEED from the skill-following start is the learning benchmark's seed_sfw, for the default recipe only
    assert collapse.archived_rates(3, "start_sfw", "default", "seed") == [0.0] * 6
    assert collapse.archived_rates(3, "start_sfw", "lr1e-5", "seed") == []
    assert collapse.archived_rates(3, "start", "default", "seed") == []
    # a run of the search's own is kept unless the twin has more updates
    assert collapse.archived_rates(3, "start", "default", "grpo") == [0.1] * 6


def test_collapse_verdict_per_run():
    collapse = importlib.import_module("collapse")
    assert collapse.holds([0.05, 0.25], updates=6, max_invalid=0.2) is False  # a collapse is final at once
    assert collapse.holds([0.05, 0.1], updates=6, max_invalid=0.2) is None  # unfinished
    assert collapse.holds([0.2] * 6, updates=6, max_invalid=0.2) is True


def test_a_rebuilt_start_point_serves_earlier_methods_only_with_the_same_weights(tmp_path, monkeypatch):
    import torch

    from seed.storage import save_verified

    monkeypatch.setattr(learning, "ARCHIVE", tmp_path / "archive")
    start = tmp_path / "seed0" / "start"
    start.mkdir(parents=True)
    weights = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(3, dtype=torch.bfloat16)}
    save_verified({"model": weights}, start / "reference.pt")
    learning.check_start(start, "seed0", "start")  # the first build: its digest is recorded
    first = json.loads((tmp_path / "archive" / "seed0" / "start" / "start_weights.json").read_text())["sha256"]
    assert first == learning.weights_digest(start / "reference.pt")
    (tmp_path / "archive" / "seed0" / "grpo").mkdir(parents=True)
    (tmp_path / "archive" / "seed0" / "grpo" / "eval_update_00003.json").write_text("{}")
    learning.check_start(start, "seed0", "start")  # rebuilt the same: grpo's runs still count
    weights["w"][1, 2] = 5.5
    save_verified({"model": weights}, start / "reference.pt")
    with pytest.raises(SystemExit, match="rebuilt with other weights.*same recorded machine facts"):
        learning.check_start(start, "seed0", "start")
    record = tmp_path / "archive" / "seed0" / "start" / "start_weights.json"
    built_on = json.loads(record.read_text())["built_on"]
    assert built_on["cpu_signature"] and built_on["torch"]
    record.write_text(json.dumps({"sha256": first, "built_on": {**built_on, "cpu_signature": "25/1/1"}}))
    with pytest.raises(SystemExit, match="cpu_signature: 25/1/1 there"):  # names what differs
        learning.check_start(start, "seed0", "start")
    (tmp_path / "archive" / "seed0" / "start" / "start_weights.json").unlink()  # methods with no recorded start
    with pytest.raises(SystemExit, match="not recorded"):
        learning.check_start(start, "seed0", "start")


def test_one_seed_gives_a_mean_and_no_standard_error():
    assert learning.mean_se([0.4]) == (0.4, None)
    m, se = learning.mean_se([0.2, 0.4])
    assert m == pytest.approx(0.3) and se == pytest.approx(0.1)


def test_recorded_work_reaches_the_archive_and_sums_per_seed(tmp_path):
    run = tmp_path / "runs" / "seed0" / "grpo"
    run.mkdir(parents=True)
    learning.record_seconds(run, "updates 1-3", 300.04)
    learning.record_seconds(run, "eval update 3", 100.0)
    start = tmp_path / "runs" / "seed0" / "start"
    start.mkdir()
    learning.record_seconds(start, "start stages", 500.0)
    archive = tmp_path / "archive"
    learning.archive(run, archive / "seed0" / "grpo")  # also writes the seed's provenance (this machine)
    learning.archive(start, archive / "seed0" / "start")
    assert json.loads((archive / "seed0" / "grpo" / "timing.json").read_text()) == [
        {"what": "updates 1-3", "seconds": 300.0},
        {"what": "eval update 3", "seconds": 100.0},
    ]
    cost = learning.machine_seconds(archive, seeds=[0, 1])
    assert list(cost) == ["0"]  # seed 1 has no recorded work
    assert cost["0"]["per_run"] == {"grpo": 400.0, "start": 500.0}
    assert cost["0"]["total"] == 900.0
    assert cost["0"]["cpu"]["cpu_signature"] == learning.machine()["cpu_signature"]


def test_the_tables_hold_only_seeds_whose_every_method_finished(tmp_path):
    for seed, methods in {0: ["grpo", "seed"], 1: ["grpo"]}.items():
        for method in methods:
            run = tmp_path / f"seed{seed}" / method
            run.mkdir(parents=True)
            for update in (0, 3, 6):
                learning.eval_file(run, update).write_text("{}")
    (tmp_path / "seed1" / "seed").mkdir()
    learning.eval_file(tmp_path / "seed1" / "seed", 3).write_text("{}")  # seed 1's SEED stopped after update 3
    assert learning.complete_seeds(tmp_path, [0, 1, 2], ["grpo", "seed"], updates=6, every=3) == [0]
    assert learning.complete_seeds(tmp_path, [0, 1, 2], ["grpo"], updates=6, every=3) == [0, 1]


def test_invalid_cap_counts_positive_invalid_steps_and_compares_updates(tmp_path):
    invalid_cap = importlib.import_module("invalid_cap")
    (tmp_path / "episodes").mkdir()

    def step(valid, advantage):
        return {"valid": valid, "advantage": advantage}

    updates = [
        [{"won": True, "steps": [step(True, 1.2), step(False, -0.4)]}],  # an invalid step of a win pushed down
        [
            {"won": True, "steps": [step(False, 1.8), step(True, 1.8)]},
            {"won": False, "steps": [step(False, 0.0), step(False, 0.3)]},
        ],
    ]
    for u, episodes in enumerate(updates):
        (tmp_path / "episodes" / f"update_{u:05d}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    counts = invalid_cap.invalid_step_counts(tmp_path)
    assert counts == {"positive_invalid_steps": [0, 2], "invalid_steps_of_wins": [1, 1]}
    row = {"update": 5, "train/loss": 0.01, "rollout/invalid_rate": 0.02, "time/update": 30.0, "memory/rss_mb": 900}
    assert invalid_cap.same_rows(row, {**row, "time/update": 31.5, "memory/rss_mb": 950})  # times and memory may
    assert not invalid_cap.same_rows(row, {**row, "train/loss": 0.010001})
    assert not invalid_cap.same_rows(row, {k: v for k, v in row.items() if k != "train/loss"})
