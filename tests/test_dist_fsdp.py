"""FSDP2 data-parallel update on 2 gloo processes == the single-process update on the same batch; the sharded
checkpoint resumes into one process."""

import pickle

import pytest
import torch

from seed.config import load_config
from seed.train.components import build_components
from seed.train.optim import make_optimizer
from seed.train.rl import compute_advantages, policy_update, task_seeds_for_update

LR = 1e-5
OVERRIDES = [
    "algo.mini_batch_size=3",
    "algo.token_budget=600",
    f"algo.lr={LR}",
    "algo.kl_coef=0.01",
    "algo.entropy_coef=0.001",
    "rollout.tasks_per_update=3",
    "rollout.group_size=2",
]


def _batch(cfg, comps):
    collector = comps.collector("train")
    episodes = collector.collect(
        comps.policy, task_seeds_for_update(cfg, 0), cfg.rollout.group_size, comps.rollout_sampling()
    )
    return compute_advantages(episodes, cfg)


def _rank(rank, world, run_dir, batch_file, out_file, ckpt_dir):
    from seed.dist.fsdp import DataParallel, full_state_dict, save_sharded, shard_policy

    cfg = load_config("tiny", [f"run_dir={run_dir}", *OVERRIDES])
    comps = build_components(cfg)
    comps.policy = shard_policy(comps.policy)
    optimizer = make_optimizer(comps.policy.model, cfg)
    batch = pickle.loads(open(batch_file, "rb").read())
    stats = policy_update(comps, optimizer, batch, dp=DataParallel())
    weights = full_state_dict(comps.policy.model)
    save_sharded(comps.policy.model, optimizer, ckpt_dir)
    if rank == 0:
        torch.save({"stats": stats, "weights": weights}, out_file)


def test_fsdp_update_on_two_processes_matches_one_process(tmp_path):
    from seed.dist.fsdp import launch, load_sharded_into_one_process

    cfg = load_config("tiny", [f"run_dir={tmp_path / 'one'}", *OVERRIDES])
    comps = build_components(cfg)
    batch = _batch(cfg, comps)
    assert len(batch.samples) >= 6
    init = {k: v.clone() for k, v in comps.policy.model.state_dict().items()}
    (tmp_path / "batch.pkl").write_bytes(pickle.dumps(batch))

    stats = policy_update(comps, make_optimizer(comps.policy.model, cfg), batch)
    single = comps.policy.model.state_dict()

    launch(
        _rank,
        2,
        str(tmp_path / "dp"),
        str(tmp_path / "batch.pkl"),
        str(tmp_path / "dp.pt"),
        str(tmp_path / "ckpt"),
        port=29517,
    )
    dp = torch.load(tmp_path / "dp.pt", weights_only=False)

    for key in ("train/loss", "train/pg_loss", "train/kl", "train/entropy", "train/grad_norm"):
        assert dp["stats"][key] == pytest.approx(stats[key], rel=1e-4, abs=1e-6), key
    moved = max((single[k] - init[k]).abs().max().item() for k in single)
    diff = max((dp["weights"][k] - single[k]).abs().max().item() for k in single)
    assert moved > 0.5 * LR  # the update did something
    assert diff <= 2 * LR  # Adam's first step is ~lr * sign(g): a sign flip of a ~0 gradient moves one weight 2*lr
    resumed = load_sharded_into_one_process(tmp_path / "ckpt")["model"]
    assert all(torch.equal(resumed[k], dp["weights"][k]) for k in single)
    print(
        f"largest weight difference {diff:.2e} (update moved weights up to {moved:.2e}); "
        f"loss {dp['stats']['train/loss']:.6f} vs {stats['train/loss']:.6f}"
    )


def test_a_run_trains_in_two_fsdp_processes_and_resumes_in_one(tmp_path):
    from seed.train.checkpoint import latest_checkpoint, load_checkpoint
    from seed.train.metrics import read_metrics
    from seed.train.pipeline import train_stage

    run = tmp_path / "run"
    cfg = load_config(
        "tiny",
        [
            f"run_dir={run}",
            "dist.train_processes=2",
            "train.updates=2",
            "distill.kind=seed",
            "distill.skill_source=privileged",
        ],
    )
    assert train_stage(build_components(cfg)) == 2
    rows = [r for r in read_metrics(run) if r["update"] > 0]
    assert [r["update"] for r in rows] == [1, 2] and all(r["train/samples"] > 0 for r in rows)
    assert all(r["distill/skill_rate"] == 1.0 for r in rows)  # rank 0's distillation reached every rank's update
    assert latest_checkpoint(run).name == "update_00002.dcp"  # sharded, one shard per rank
    state = load_checkpoint(latest_checkpoint(run))
    assert state["update"] == 2 and isinstance(next(iter(state["optimizer"]["state"])), int)
    single = load_config(
        "tiny", [f"run_dir={run}", "train.updates=3", "distill.kind=seed", "distill.skill_source=privileged"]
    )
    assert train_stage(build_components(single)) == 3  # the data-parallel checkpoint resumes in one process
    assert load_checkpoint(latest_checkpoint(run))["update"] == 3


def test_data_parallel_training_rejects_what_it_does_not_support():
    from seed.config import ConfigError

    with pytest.raises(ConfigError, match="distill.teacher_weights"):
        load_config("tiny", ["dist.train_processes=2", "distill.teacher_weights=ema"])


def test_export_merges_lora_into_a_plain_hugging_face_folder(tmp_path):
    from transformers import AutoModelForCausalLM

    from seed.cli import main
    from seed.train.pipeline import train_stage

    run = tmp_path / "run"
    cfg = load_config(
        "tiny",
        [
            f"run_dir={run}",
            "train.updates=1",
            "algo.lr=1e-2",
            "model.lora={r: 4, lora_alpha: 8, target_modules: [q_proj, v_proj]}",
        ],
    )
    comps = build_components(cfg)
    train_stage(comps)
    assert main(["export", str(run), str(tmp_path / "hf")]) == 0
    plain = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert not any("lora" in n for n, _ in plain.named_parameters())
    ids = torch.tensor([comps.tokenizer.encode("push the box onto the target")])
    comps.policy.model.eval()
    with torch.no_grad():
        assert torch.allclose(plain(input_ids=ids).logits, comps.policy.model(input_ids=ids).logits, atol=1e-4)
