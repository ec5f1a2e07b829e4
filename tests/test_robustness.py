"""Nothing poisons a run: non-finite steps, unsafe or damaged checkpoints, leaked keys, damaged run state, env faults.

Each test is a reproduction of a way a run used to die, lose data or let code in, run through the real `seed`
command or the real components on the tiny config.
"""

import json
import random
import shutil
import time

import numpy as np
import pytest
import torch

from hostile import RELEASE, FaultySokoban, plant
from seed.cli import main
from seed.config import load_config
from seed.dist.env_pool import EnvFault, LocalEnvPool
from seed.envs.base import make, register
from seed.errors import CheckpointError, NonFiniteError
from seed.rollout.collector import Collector, RolloutSettings
from seed.skills.sources import PrivilegedAnalyzer, TeacherAnalyzer
from seed.skills.teachers import OracleTeacher
from seed.storage import load_verified, read_jsonl, save_verified
from seed.train.analyzer_sft import label_episodes
from seed.train.checkpoint import list_checkpoints, load_checkpoint, rng_state, save_checkpoint, set_rng_state
from seed.train.metrics import read_metrics


@pytest.fixture(autouse=True, scope="module")
def faulty_env_registered():
    """Registered only while this module's tests run: other tests see the built-in registry."""
    from seed.envs.base import _REGISTRY

    register("faulty-sokoban", "tests only: Sokoban whose calls fail on purpose")(FaultySokoban)
    yield
    _REGISTRY.pop("faulty-sokoban")


def _faulty(mode):
    return lambda: make("faulty-sokoban", split="train", mode=mode)


def _train(run, *extra):
    return main(["train", "tiny", f"run_dir={run}", "train.keep_checkpoints=5", "eval.episodes=2", *extra])


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A tiny run of 2 updates with every checkpoint kept (0, 1, 2); tests damage copies of it."""
    run = tmp_path_factory.mktemp("finished") / "run"
    assert _train(run, "train.updates=2") == 0
    return run


@pytest.fixture()
def run_copy(finished_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    return run


def _rollout_updates(run):
    return [r["update"] for r in read_metrics(run) if "time/rollout" in r]


# 1. non-finite updates never land


def test_a_huge_learning_rate_stops_the_run_before_any_nan_weight_is_saved(tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(run, "algo.lr=1e30", "train.updates=6", "warmup.enabled=false") == 1
    err = capsys.readouterr().err
    assert "3 optimizer steps in a row were skipped" in err and "algo.lr" in err
    for ckpt in list_checkpoints(run):
        assert all(torch.isfinite(v).all() for v in load_checkpoint(ckpt)["model"].values() if v.is_floating_point())
    rows = [r for r in read_metrics(run) if "train/skipped_steps" in r]
    assert sum(r["train/skipped_steps"] for r in rows) >= 2 and rows[0]["train/skipped_steps"] == 0


def test_the_start_stages_step_only_on_finite_gradients():
    from seed.train.optim import guarded_step

    w = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=1.0)
    w.grad = torch.tensor([1.0, float("nan")])
    assert not guarded_step(opt, [w], 1.0, loss_value=0.5)
    assert torch.equal(w.detach(), torch.ones(2)) and w.grad is None
    w.grad = torch.tensor([3.0, 4.0])
    assert not guarded_step(opt, [w], 1.0, loss_value=float("inf"))
    w.grad = torch.tensor([3.0, 4.0])
    assert guarded_step(opt, [w], 1.0, loss_value=0.5)  # clipped to norm 1: w -= (0.6, 0.8)
    assert torch.allclose(w.detach(), torch.tensor([0.4, 0.2]))


def test_a_checkpoint_with_nan_weights_is_refused(tmp_path):
    with pytest.raises(NonFiniteError, match="NaN/inf"):
        save_checkpoint(tmp_path, 1, {"model": {"w": torch.tensor([1.0, float("nan")])}})
    assert not list(tmp_path.rglob("*"))  # nothing written, not even a temp file


# 2. loading a checkpoint cannot run code; a checksum is verified on load


def test_checkpoint_round_trip_verifies_and_restores_rng_exactly(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    path = save_checkpoint(tmp_path, 3, {"model": {"w": torch.arange(4.0)}, "rng": rng_state(), "update": 3})
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    state = load_checkpoint(path)
    set_rng_state(state["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError):
        load_checkpoint(path)


def test_a_planted_pickle_is_refused_by_train_and_export(run_copy, tmp_path, capsys):
    marker = tmp_path / "payload_ran"
    planted = run_copy / "checkpoints" / "update_00009.pt"
    plant(planted, marker)
    assert _train(run_copy, "train.updates=3") == 0  # the planted file is set aside; update 2 resumes
    assert not marker.exists() and (run_copy / "checkpoints" / "update_00009.pt.damaged").exists()
    assert _rollout_updates(run_copy) == [1, 2, 3]
    plant(planted, marker)
    assert main(["export", str(run_copy), str(tmp_path / "hf"), "--checkpoint", str(planted)]) == 1
    assert "cannot be read safely" in capsys.readouterr().err and not marker.exists()


def test_a_sharded_checkpoint_with_a_planted_metadata_pickle_is_refused(tmp_path):
    from seed.dist.fsdp import _folder_digest, load_sharded_into_one_process

    folder, marker = tmp_path / "update_00001.dcp", tmp_path / "payload_ran"
    folder.mkdir()
    plant(folder / ".metadata", marker)
    save_verified({"update": 1, "files_sha256": _folder_digest(folder)}, folder / "meta.pt")  # a forged checksum
    with pytest.raises(CheckpointError, match="not allowed"):
        load_sharded_into_one_process(folder)
    assert not marker.exists()


# 3. secrets stay secret


def test_an_api_key_is_never_written_to_the_run_directory(tmp_path):
    run, key = tmp_path / "run", "sk-test-DO-NOT-WRITE-1234567890"
    assert _train(run, f"label.openai.api_key={key}", "train.updates=1", "warmup.enabled=false") == 0
    files = [p for p in run.rglob("*") if p.is_file()]
    assert len(files) > 3 and not [p for p in files if key.encode() in p.read_bytes()]
    assert load_config(run / "config.yaml").label.openai.api_key == "<redacted>"


def test_keys_come_from_env_or_file_and_plain_http_to_a_remote_host_warns(tmp_path, monkeypatch, caplog):
    from seed.skills.openai_teacher import OpenAITeacher, resolve_api_key

    monkeypatch.setenv("MY_KEY", "from-env")
    (tmp_path / "key").write_text("from-file\n")
    assert resolve_api_key(api_key_env="MY_KEY") == "from-env"
    assert resolve_api_key(api_key_file=str(tmp_path / "key"), api_key_env="MY_KEY") == "from-file"
    OpenAITeacher("http://127.0.0.1:8000/v1", "m", api_key="k")
    assert "unencrypted" not in caplog.text
    OpenAITeacher("http://teacher.example.com/v1", "m", api_key="k")
    assert "unencrypted" in caplog.text


# 6. damaged state recovers or says exactly what to do


def test_a_torn_or_undecodable_metrics_line_does_not_block_resume(run_copy):
    with (run_copy / "metrics.jsonl").open("ab") as f:
        f.write(b'{"update": 2, "bad": "\xff\xfe"}\n{"update": 3, "rollout/succ')  # a kill mid-write
    assert _train(run_copy, "train.updates=3") == 0
    assert _rollout_updates(run_copy) == [1, 2, 3]
    assert len(read_jsonl(run_copy / "metrics.jsonl")) == len((run_copy / "metrics.jsonl").read_text().splitlines())


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_newest_that_verifies(run_copy, capsys, damage):
    newest = run_copy / "checkpoints" / "update_00002.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2] if damage == "truncated" else b"")
    assert _train(run_copy, "train.updates=3") == 0
    assert "resuming from update_00001.pt" in capsys.readouterr().out
    assert _rollout_updates(run_copy) == [1, 2, 3]  # update 2 redone, nothing repeated
    assert (run_copy / "checkpoints" / "update_00002.pt.damaged").exists()


def test_a_deleted_reference_is_rebuilt_from_the_start_point_or_refused(run_copy, capsys):
    start = load_checkpoint(run_copy / "checkpoints" / "update_00000.pt")["model"]
    (run_copy / "reference.pt").unlink()
    assert _train(run_copy, "train.updates=3") == 0
    assert "rebuilt from the start point" in capsys.readouterr().out
    rebuilt = load_verified(run_copy / "reference.pt")["model"]
    assert all(torch.equal(rebuilt[k], start[k]) for k in start)
    (run_copy / "reference.pt").unlink()
    (run_copy / "checkpoints" / "update_00000.pt").unlink()
    assert _train(run_copy, "train.updates=4") == 1
    assert "reference.pt is missing and cannot be rebuilt" in capsys.readouterr().err


def test_stale_temporaries_are_cleaned_and_start_stages_never_repeat(run_copy, monkeypatch):
    stale = run_copy / "checkpoints" / ".update_00003.pt.4242.tmp"
    stale.write_bytes(b"half a checkpoint")
    # as if killed after the start point was saved, before its marker: only checkpoint 0 and the run's config left
    for p in list_checkpoints(run_copy)[1:]:
        p.unlink()
    (run_copy / "stage_warmup.json").unlink()
    (run_copy / "metrics.jsonl").write_text("")

    def no_second_warmup(*args, **kwargs):
        raise AssertionError("the warm-up ran twice")

    monkeypatch.setattr("seed.train.warmup.format_warmup", no_second_warmup)
    assert _train(run_copy, "train.updates=1") == 0
    assert not stale.exists() and (run_copy / "stage_warmup.json").exists()
    assert [r["update"] for r in read_metrics(run_copy)] == [0, 1]  # one update-0 row


# 7. env faults stay in their episode


def _collector(factory, step_timeout=0.0, tokenizer=None):
    settings = RolloutSettings(max_steps=2, history_length=1)
    return Collector(factory, "sokoban", tokenizer, settings, pool=LocalEnvPool(factory, step_timeout))


def test_an_env_returning_none_or_raising_loses_only_its_episodes(tokenizer):
    from seed.models import HFBackend, Sampling, load_model

    backend = HFBackend(load_model("tiny-random", tokenizer), tokenizer)
    sampling = Sampling(temperature=1.0, max_new_tokens=4)
    episodes = _collector(_faulty("odd_reset_raises"), tokenizer=tokenizer).collect(backend, [0, 1], 2, sampling)
    assert [e.error is None for e in episodes] == [True, True, False, False]
    episodes = _collector(_faulty("step_none"), tokenizer=tokenizer).collect(backend, [0], 2, sampling)
    assert all("step returned NoneType" in e.error for e in episodes)


def test_a_hung_step_in_process_times_out_and_the_env_is_replaced():
    pool = LocalEnvPool(_faulty("step_hangs"), step_timeout=0.5)
    try:
        pool.reset([(0, 0)])
        t0 = time.perf_counter()
        [result] = pool.step([(0, "up")])
        assert isinstance(result, EnvFault) and "env.step_timeout" in result.message
        assert time.perf_counter() - t0 < 5
        assert 0 not in pool.envs  # the hung env is never used again
        assert pool.reset([(0, 1)])[0].task  # a fresh env serves the slot
    finally:
        RELEASE.set()


def test_a_run_whose_every_episode_faults_stops_with_a_clear_message(tmp_path, capsys):
    rc = _train(tmp_path / "run", "env.name=faulty-sokoban", "env.kwargs={mode: reset_raises}", "warmup.enabled=false")
    assert rc == 1 and "all 4 episodes faulted" in capsys.readouterr().err


def test_warmup_oracle_and_privileged_teacher_survive_env_faults(tmp_path):
    run = tmp_path / "run"  # warm-up demonstration 1 of 2 and the odd-seeded task of update 1 fault
    assert _train(run, "env.name=faulty-sokoban", "env.kwargs={mode: odd_reset_raises}", "train.updates=1") == 0
    assert json.loads((run / "stage_warmup.json").read_text())["warmup/samples"] > 0
    assert read_metrics(run)[-1]["rollout/dropped_episodes"] == 2
    from seed.types import Episode

    episodes = [Episode("e0", 0, 0, "push", "sokoban")]
    assert label_episodes(OracleTeacher(_faulty("expert_raises")), episodes) == [None]
    [(_, oracle)] = TeacherAnalyzer(OracleTeacher(_faulty("expert_raises"))).analyse(episodes)
    [(_, privileged)] = PrivilegedAnalyzer(_faulty("expert_raises")).analyse(episodes)
    assert oracle.skill is None and "planner crashed" in oracle.error
    assert privileged.skill is None and "planner crashed" in privileged.error
