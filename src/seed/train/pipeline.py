"""Stages of a run, each resumable inside one run directory: warm-up, eval, train."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from seed.config import Config, check_resume, redacted, save_config
from seed.errors import CheckpointError, RunError
from seed.storage import atomic_write_text, load_verified, save_verified
from seed.train.checkpoint import (
    check_finite_weights,
    load_latest_checkpoint,
    remove_stale_temporaries,
    rng_state,
    save_checkpoint,
)
from seed.train.evaluate import evaluate, format_table
from seed.train.metrics import MetricsLogger, phase_peak, read_metrics
from seed.train.optim import make_optimizer
from seed.train.rl import train, write_jsonl
from seed.train.wandb_sink import finish as finish_wandb
from seed.train.wandb_sink import open_sink

if TYPE_CHECKING:  # annotations only
    from seed.train.components import Components

log = logging.getLogger(__name__)


def progress_bar(**kw):
    from tqdm.auto import tqdm

    return tqdm(dynamic_ncols=True, **kw)


def prepare_run_dir(cfg: Config, force: bool = False) -> Path:
    """Create the run directory and write its config, or check that an existing run's config is this one
    (seed.config.check_resume: a changed config needs `force`; some keys can never change). Idempotent."""
    run_dir = Path(cfg.run_dir)
    if check_resume(cfg, run_dir, force=force):  # --force: the old config is kept beside the new one
        n = 1
        while (run_dir / f"config.{n}.yaml").exists():
            n += 1
        (run_dir / "config.yaml").replace(run_dir / f"config.{n}.yaml")
        print(f"seed: continuing under a changed config (--force); the old one is {run_dir / f'config.{n}.yaml'}")
    run_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(run_dir)
    save_config(cfg, run_dir / "config.yaml")
    open_sink(cfg)  # W&B, where on, starts (or fails) before any work
    return run_dir


def load_latest_weights(components: Components) -> int:
    """Load the newest verified checkpoint's model weights (if any); returns its update index (0 if none)."""
    _, state = load_latest_checkpoint(Path(components.cfg.run_dir))
    if state is None:
        return 0
    components.policy.model.load_state_dict(state["model"])
    return int(state["update"])


def _save_start_point(components: Components, stages: dict) -> None:
    """The model after the start stages is checkpoint 0 and the KL reference (as SEED's SFT model is). Checkpoint 0
    also records which start stages it holds, so a run killed before their marker files never repeats them. The
    reference is only written here: the RL stage builds it (`load_reference`), so no later start stage trains
    beside a frozen copy of the weights."""
    cfg = components.cfg
    weights = components.policy.model.state_dict()
    check_finite_weights(weights, "the start point")
    save_verified({"model": weights}, Path(cfg.run_dir) / "reference.pt")
    save_checkpoint(
        Path(cfg.run_dir),
        0,
        {
            "model": weights,
            "optimizer": make_optimizer(components.policy.model, cfg).state_dict(),
            "rng": rng_state(),
            "generator": components.sampling_generator.get_state(),
            "update": 0,
            "config": redacted(cfg.to_dict()),
            "start_stages": stages,
        },
        keep=cfg.train.keep_checkpoints,
    )


def _start_stage(components: Components, name: str, fn) -> None:
    """Run a start stage (analyzer SFT, format warm-up) once per run directory; a marker file records it."""
    run_dir = Path(components.cfg.run_dir)
    marker = run_dir / f"stage_{name}.json"
    if marker.exists():
        return
    latest, state = load_latest_checkpoint(run_dir)
    stages = dict(state.get("start_stages", {})) if state is not None else {}
    if name in stages:  # killed after the start point was saved: record the stage, do not run it again
        _record_stage(components.cfg, name, stages[name])
        return
    if latest is not None and latest.name != "update_00000.pt":
        return  # RL has started: start stages are over
    if state is not None:
        components.policy.model.load_state_dict(state["model"])
    del state  # copied into the model: the stage must not run beside a second copy of the weights
    stats = fn()
    _save_start_point(components, {**stages, name: stats})
    _record_stage(components.cfg, name, stats)
    log.info("%s: %s", name, stats)


def _record_stage(cfg: Config, name: str, stats: dict) -> None:
    """The stage's metrics row at update 0 (once) and its marker file."""
    run_dir = Path(cfg.run_dir)
    if not any(r.get("update") == 0 and set(stats) <= set(r) for r in read_metrics(run_dir)):
        MetricsLogger(run_dir, tensorboard=False, wandb=open_sink(cfg)).log(0, stats)
    atomic_write_text(run_dir / f"stage_{name}.json", json.dumps(stats, indent=2))


def sft_stage_once(components: Components) -> None:
    """`seed label` + `seed sft` when sft.enabled: teacher labels, then the analyzer warm-up."""
    if not components.cfg.sft.enabled:
        return
    from seed.train.analyzer_sft import label_stage, sft_stage

    def run() -> dict:
        peaks: dict = {}
        with phase_peak(peaks, "label"):
            bar = progress_bar(total=components.cfg.label.tasks, desc="label (tasks)")
            labels = label_stage(components, progress=bar.update)
            bar.close()
        with phase_peak(peaks, "sft"):
            stats = sft_stage(components, labels, progress_factory=progress_bar)
        return {**stats, **peaks}

    _start_stage(components, "sft", run)


def warmup_stage(components: Components) -> None:
    """Format warm-up once (when warmup.enabled)."""
    if not components.cfg.warmup.enabled:
        return
    from seed.train.warmup import format_warmup

    def run() -> dict:
        peaks: dict = {}
        with phase_peak(peaks, "warmup"):
            stats = format_warmup(components, progress_factory=progress_bar)
        return {**stats, **peaks}

    _start_stage(components, "warmup", run)


def start_stages(components: Components) -> None:
    """Format warm-up (if enabled) first, so the labelled episodes come from a policy that can act; then the
    analyzer warm-up (label + SFT) if enabled."""
    warmup_stage(components)
    sft_stage_once(components)
    load_latest_weights(components)


def eval_stage(components: Components, tag: str) -> dict:
    """Evaluate the current weights; results go to eval_<tag>.json (skipped if that file exists)."""
    run_dir = Path(components.cfg.run_dir)
    out = run_dir / f"eval_{tag}.json"
    if out.exists():
        return json.loads(out.read_text())
    cfg = components.cfg
    bar = progress_bar(total=cfg.env.max_steps * len(cfg.eval.splits), desc=f"eval {tag} (turns)")
    with phase_peak({}, "eval"):
        results = evaluate(components, progress=lambda live: bar.update(1))
    bar.close()
    for split, r in results.items():
        write_jsonl(run_dir / "eval" / tag / f"{split}.jsonl", r.pop("episodes"))
    sink = open_sink(cfg)
    if sink is not None:  # initial at step 0, final after the last update, update_N at N
        steps = {"initial": 0, "final": cfg.train.updates}
        step = steps[tag] if tag in steps else int(tag.rsplit("_", 1)[-1])
        sink.log(step, {f"eval/{split}/{k}": v for split, r in results.items() for k, v in r["overall"].items()})
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=2))
    tmp.replace(out)
    print(f"\nevaluation ({tag}):\n{format_table(results)}")
    return results


def load_reference(components: Components) -> None:
    """The KL reference: `reference.pt` once a start stage has changed the weights, else the model as loaded.
    A missing reference.pt is rebuilt from checkpoint 0 when that still verifies; otherwise the run refuses to go
    on rather than regularise towards the wrong model. Where start stages run, the reference is built here, after
    them: they train without a frozen copy beside the model."""
    if not components.wants_reference:
        return
    run_dir, ref_path = Path(components.cfg.run_dir), components.reference_path
    if not ref_path.exists():
        if not list(run_dir.glob("stage_*.json")):  # no start stage ran: the start model is the model as loaded
            if components.reference is None:  # (start stages were switched on after RL began)
                _load_model_as_configured(components.build_reference().model, components)
            return
        start = run_dir / "checkpoints" / "update_00000.pt"
        try:
            weights = load_verified(start)["model"]
        except CheckpointError as exc:
            raise RunError(
                f"{ref_path} is missing and cannot be rebuilt ({exc}); restore reference.pt or start a new run_dir"
            ) from exc
        save_verified({"model": weights}, ref_path)
        log.warning("reference.pt was missing: rebuilt from %s", start)
        print(f"seed: {ref_path} was missing; rebuilt from the start point {start.name}")
    components.build_reference().model.load_state_dict(load_verified(ref_path)["model"])


def _load_model_as_configured(target, components) -> None:
    import torch

    from seed.models import load_model

    cfg = components.cfg
    with torch.random.fork_rng():  # a random-init model seeds torch: the run's own stream stays as it was
        loaded = load_model(cfg.model.name, components.tokenizer, lora=cfg.model.lora, seed=cfg.seed)
    target.load_state_dict(loaded.state_dict())


def rl_stage(components: Components) -> int:
    """The RL updates (`train.updates`), from the run directory's newest checkpoint; returns the updates done.
    The KL reference is built here, once. With `dist.train_processes` > 1 FSDP2 ranks train (each builds its own
    reference) and this process then loads their result."""
    cfg = components.cfg
    if cfg.dist.train_processes > 1:
        finish_wandb()  # rank 0 continues the W&B run; this process resumes it afterwards
        _train_data_parallel(str(Path(cfg.run_dir) / "config.yaml"), cfg.dist.train_processes)
        return load_latest_weights(components)
    load_reference(components)
    return train(components, progress_factory=progress_bar, evaluate_every=lambda u: periodic_eval(components, u))


def _train_data_parallel(config_path: str, processes: int) -> None:
    """The RL stage in `processes` FSDP2 ranks (spawned here; the start stages ran in the calling process)."""
    import torch.multiprocessing as mp

    from seed.dist.fsdp import free_port, launch

    try:
        launch(_train_rank, processes, config_path, port=free_port())
    except mp.ProcessRaisedException as exc:  # one rank stopped (the others are terminated): its message, once
        lines = [x for x in str(exc).splitlines() if x.strip()]
        raise RunError(f"a training rank stopped: {lines[-1] if lines else exc}") from exc


def _train_rank(rank: int, world: int, config_path: str) -> None:
    """One FSDP2 process: the run's components, its KL reference, then `train` as rank `rank` of `world`."""
    from seed.config import load_config
    from seed.train.components import build_components
    from seed.train.parallel import FSDPRanks

    components = build_components(load_config(config_path))
    load_reference(components)
    try:
        train(components, progress_factory=progress_bar if rank == 0 else None, ranks=FSDPRanks())
    finally:
        finish_wandb()  # rank 0 logged to W&B (where on): its run ends before the parent resumes it


def train_stage(components: Components) -> int:
    """`seed train` in one call: the run directory, the start stages, then the RL stage."""
    prepare_run_dir(components.cfg)
    start_stages(components)
    return rl_stage(components)


def periodic_eval(components: Components, update: int) -> dict:
    """`eval.every`: the panels after update N (eval_update_N.json), as metrics. The rollout generator's state is
    put back afterwards, so evaluating does not change the training run."""
    generator = components.sampling_generator
    state = generator.get_state()
    results = eval_stage(components, f"update_{update:05d}")
    generator.set_state(state)
    return {f"eval/{split}/success": r["overall"]["success"] for split, r in results.items()}
