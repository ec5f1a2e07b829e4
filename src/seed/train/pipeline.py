"""Stages of a run, each resumable inside one run directory: warm-up, eval, train."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch

from seed.config import Config, save_config
from seed.train.checkpoint import latest_checkpoint, load_checkpoint, rng_state, save_checkpoint
from seed.train.evaluate import evaluate, format_table
from seed.train.metrics import MetricsLogger
from seed.train.rl import make_optimizer, train, write_jsonl

log = logging.getLogger(__name__)


def progress_bar(**kw):
    from tqdm.auto import tqdm

    return tqdm(dynamic_ncols=True, **kw)


def prepare_run_dir(cfg: Config) -> Path:
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.yaml")
    return run_dir


def load_latest_weights(components) -> int:
    """Load the newest checkpoint's model weights (if any); returns its update index (0 if none)."""
    ckpt = latest_checkpoint(Path(components.cfg.run_dir))
    if ckpt is None:
        return 0
    state = load_checkpoint(ckpt)
    components.policy.model.load_state_dict(state["model"])
    return int(state["update"])


def _save_start_point(components) -> None:
    """The model after the start stages is checkpoint 0 and the KL reference (as SEED's SFT model is)."""
    cfg = components.cfg
    ref_path = Path(cfg.run_dir) / "reference.pt"
    tmp = ref_path.with_suffix(".tmp")
    torch.save(components.policy.model.state_dict(), tmp)
    os.replace(tmp, ref_path)
    load_reference(components)
    save_checkpoint(Path(cfg.run_dir), 0, {
        "model": components.policy.model.state_dict(),
        "optimizer": make_optimizer(components.policy.model, cfg).state_dict(),
        "rng": rng_state(), "generator": components.policy.generator.get_state(), "update": 0,
        "config": cfg.to_dict()}, keep=cfg.train.keep_checkpoints)


def _start_stage(components, name: str, fn) -> None:
    """Run a start stage (analyzer SFT, format warm-up) once per run directory; a marker file records it."""
    run_dir = Path(components.cfg.run_dir)
    marker = run_dir / f"stage_{name}.json"
    if marker.exists():
        return
    latest = latest_checkpoint(run_dir)
    if latest is not None and latest.name != "update_00000.pt":
        return  # RL has started: start stages are over
    load_latest_weights(components)
    stats = fn()
    MetricsLogger(run_dir, tensorboard=False).log(0, stats)
    _save_start_point(components)
    marker.write_text(json.dumps(stats, indent=2))
    log.info("%s: %s", name, stats)


def sft_stage_once(components) -> None:
    """`seed label` + `seed sft` when sft.enabled: teacher labels, then the analyzer warm-up."""
    if not components.cfg.sft.enabled:
        return
    from seed.train.analyzer_sft import label_stage, sft_stage

    def run() -> dict:
        bar = progress_bar(total=components.cfg.label.tasks, desc="label (tasks)")
        labels = label_stage(components, progress=bar.update)
        bar.close()
        return sft_stage(components, labels, progress_factory=progress_bar)

    _start_stage(components, "sft", run)


def warmup_stage(components) -> None:
    """Format warm-up once (when warmup.enabled)."""
    if not components.cfg.warmup.enabled:
        return
    from seed.train.warmup import format_warmup

    _start_stage(components, "warmup", lambda: format_warmup(components, progress_factory=progress_bar))


def start_stages(components) -> None:
    """Format warm-up (if enabled) first, so the labelled episodes come from a policy that can act; then the
    analyzer warm-up (label + SFT) if enabled."""
    warmup_stage(components)
    sft_stage_once(components)
    load_latest_weights(components)


def eval_stage(components, tag: str) -> dict:
    """Evaluate the current weights; results go to eval_<tag>.json (skipped if that file exists)."""
    run_dir = Path(components.cfg.run_dir)
    out = run_dir / f"eval_{tag}.json"
    if out.exists():
        return json.loads(out.read_text())
    cfg = components.cfg
    bar = progress_bar(total=cfg.env.max_steps * len(cfg.eval.splits), desc=f"eval {tag} (turns)")
    results = evaluate(components, progress=lambda live: bar.update(1))
    bar.close()
    for split, r in results.items():
        write_jsonl(run_dir / "eval" / tag / f"{split}.jsonl", r.pop("episodes"))
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=2))
    tmp.replace(out)
    print(f"\nevaluation ({tag}):\n{format_table(results)}")
    return results


def load_reference(components) -> None:
    ref_path = Path(components.cfg.run_dir) / "reference.pt"
    if components.reference is not None and ref_path.exists():
        components.reference.model.load_state_dict(torch.load(ref_path, map_location="cpu"))


def train_stage(components) -> int:
    prepare_run_dir(components.cfg)
    start_stages(components)
    load_reference(components)
    if components.cfg.dist.train_processes > 1:  # FSDP2 ranks train; this process then holds the result
        from seed.dist.fsdp import train_data_parallel

        train_data_parallel(str(Path(components.cfg.run_dir) / "config.yaml"), components.cfg.dist.train_processes)
        return load_latest_weights(components)
    return train(components, progress_factory=progress_bar)
