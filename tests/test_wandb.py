"""`logging.wandb` in offline mode, read back from the run file wandb writes: the same numbers as metrics.jsonl,
the eval panels, the episode table with the skills, one W&B run per run directory across a resume; and a clear
config error where wandb is missing. The offline test runs only where the wandb package is installed."""

import importlib.util
import json
from pathlib import Path

import pytest

from seed.cli import main
from seed.config import ConfigError, load_config
from seed.storage import read_jsonl

WANDB_ARGS = ["logging.wandb.project=seed-test", "logging.wandb.mode=offline", "logging.wandb.episodes=3"]


def wandb_records(path: Path) -> list:
    """The protobuf records of a .wandb file: a ':W&B' header, then records in 32 KiB blocks, each record as
    (crc32, length, type) + payload, split across blocks as FIRST/MIDDLE/LAST pieces."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    pos, pending, records = 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL, or the LAST piece
            record = pb.Record()
            try:
                record.ParseFromString(pending)
            except Exception:  # a tail wandb-core is still writing
                break
            records.append(record)
            pending = b""
    return records


def history(run_dirs: list[Path]) -> dict[int, dict]:
    """step -> {key: value} over every offline run file of the W&B run."""
    rows: dict[int, dict] = {}
    for path in run_dirs:
        for record in wandb_records(next(path.glob("run-*.wandb"))):
            if record.WhichOneof("record_type") == "history":
                row = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
                rows.setdefault(row["_step"], {}).update(row)
    return rows


def test_offline_wandb_run_carries_the_metrics_eval_and_episode_table(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is optional; this smoke test runs where it is installed")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "tiny",
                f"run_dir={run_dir}",
                "distill.kind=seed",
                "distill.skill_source=teacher",
                "warmup.enabled=false",
                "eval.episodes=2",
                *WANDB_ARGS,
            ]
        )
        == 0
    )
    run_id = (run_dir / "wandb" / "seed_run_id").read_text()
    offline = sorted((run_dir / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(offline) == 1
    rows = history(offline)
    metrics = {r["update"]: r for r in read_jsonl(run_dir / "metrics.jsonl") if r["update"] > 0}
    assert sorted(metrics) == [1, 2]
    for update, row in metrics.items():
        for key in ("rollout/success", "loss/total", "time/rollout", "memory/rss_mb"):
            if key in row:
                assert rows[update][key] == pytest.approx(row[key])
    initial = json.loads((run_dir / "eval_initial.json").read_text())
    final = json.loads((run_dir / "eval_final.json").read_text())
    assert rows[0]["eval/valid_seen/success"] == pytest.approx(initial["valid_seen"]["overall"]["success"])
    assert rows[2]["eval/valid_unseen/success"] == pytest.approx(final["valid_unseen"]["overall"]["success"])

    tables = sorted((offline[0] / "files" / "media" / "table").glob("episodes_*.table.json"))
    assert len(tables) == 2  # one per update
    table = json.loads(tables[0].read_text())
    skills = {r["episode_id"]: r["skill"] for r in read_jsonl(run_dir / "skills.jsonl")}
    assert len(table["data"]) == 3
    groups = [row[table["columns"].index("group")] for row in table["data"]]
    assert len(set(groups)) == min(3, load_config("tiny").rollout.tasks_per_update)  # spread over the groups
    for row in table["data"]:
        shown = dict(zip(table["columns"], row))
        assert shown["skill"] == (skills.get(shown["episode_id"]) or "")
    assert any(dict(zip(table["columns"], row))["skill"] for row in table["data"])  # the oracle explains failures

    # a resumed run directory continues the same W&B run
    assert (
        main(
            [
                "train",
                "tiny",
                f"run_dir={run_dir}",
                "distill.kind=seed",
                "distill.skill_source=teacher",
                "warmup.enabled=false",
                "eval.episodes=2",
                "train.updates=3",
                *WANDB_ARGS,
            ]
        )
        == 0
    )
    assert (run_dir / "wandb" / "seed_run_id").read_text() == run_id
    offline = sorted((run_dir / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(offline) == 2
    resumed = history(offline[1:])  # wandb-core sometimes leaves a short resumed offline run's history unwritten
    if 3 in resumed:
        assert resumed[3]["rollout/success"] == pytest.approx(
            read_jsonl(run_dir / "metrics.jsonl")[-1]["rollout/success"]
        )


def test_wandb_project_without_the_package_is_a_config_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ConfigError, match="logging.wandb.project.*pip install wandb"):
        load_config("tiny", ["logging.wandb.project=x"])
    assert load_config("tiny", ["logging.wandb.project=x", "logging.wandb.mode=disabled"]).logging.wandb.project
    with pytest.raises(ConfigError, match="logging.wandb.mode.*offline, online, disabled"):
        load_config("tiny", ["logging.wandb.mode=cloud"])
