"""Weights & Biases, optional: the metrics of metrics.jsonl, the eval panels and, per update, a table of sampled
episodes with their skills, in one W&B run per run directory (`logging.wandb`).

wandb holds one run per process, so a process opens the sink once (`open_sink`, idempotent) and finishes it when
its command ends (`finish`), or before handing training to other processes. The run's id is kept in the run
directory, so a resumed run directory continues the same W&B run. A W&B fault after the start is logged and
turns the sink off: it never stops training.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

from seed.config import Config, redacted
from seed.errors import RunError
from seed.storage import atomic_write_text
from seed.train.metrics import finite_numbers

log = logging.getLogger(__name__)

TABLE_COLUMNS = [
    "update",
    "episode_id",
    "group",
    "task_type",
    "task",
    "won",
    "score",
    "steps",
    "invalid_steps",
    "skill",
    "skill_parsed",
    "analyzer_output",
]
_ANALYZER_CHARS = 2000  # an analyzer that never stops would otherwise fill the table

_open: WandbSink | None = None


def open_sink(cfg: Config) -> WandbSink | None:
    """The W&B run of `cfg.run_dir` (opened on first use), or None when `logging.wandb` is off."""
    global _open
    w = cfg.logging.wandb
    if not w.project or w.mode == "disabled":
        return None
    if _open is not None and _open.run_dir == Path(cfg.run_dir).resolve():
        return _open
    finish()
    _open = WandbSink(cfg)
    return _open


def finish() -> None:
    """Finish this process's W&B run, if one is open."""
    global _open
    if _open is not None:
        sink, _open = _open, None
        sink.close()


def episode_rows(update: int, episodes: list, limit: int) -> list[list]:
    """Up to `limit` episodes as table rows, taken round-robin over the groups so every task shows."""
    groups: dict[int, list] = {}
    for ep in episodes:
        groups.setdefault(ep.group_id, []).append(ep)
    picked, depth = [], 0
    while len(picked) < limit and any(depth < len(g) for g in groups.values()):
        picked += [g[depth] for _, g in sorted(groups.items()) if depth < len(g)]
        depth += 1
    rows = []
    for ep in picked[:limit]:
        analysis = ep.analysis or {}
        rows.append(
            [
                update,
                ep.episode_id,
                ep.group_id,
                ep.task_type,
                ep.task,
                bool(ep.won),
                float(ep.score),
                len(ep.steps),
                ep.num_invalid,
                ep.skill or "",
                analysis.get("parsed"),
                str(analysis.get("raw", ""))[:_ANALYZER_CHARS],
            ]
        )
    return rows


class WandbSink:
    def __init__(self, cfg: Config):
        import wandb

        self.run_dir = Path(cfg.run_dir).resolve()
        self.episodes_per_update = cfg.logging.wandb.episodes
        id_file = self.run_dir / "wandb" / "seed_run_id"
        id_file.parent.mkdir(parents=True, exist_ok=True)
        run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:12]
        atomic_write_text(id_file, run_id)
        w = cfg.logging.wandb
        try:
            self.run = wandb.init(
                project=w.project,
                entity=w.entity or None,
                mode=w.mode,
                dir=str(self.run_dir),
                id=run_id,
                resume="allow",
                name=self.run_dir.name,
                config=redacted(cfg.to_dict()),
                settings=wandb.Settings(console="off", silent=True),
            )
        except Exception as exc:  # wandb raises its own error types (no login, bad entity, no network)
            raise RunError(
                f"W&B could not start (logging.wandb: project {w.project!r}, mode {w.mode!r}): "
                f"{' '.join(str(exc).split())[:300]}; use mode=offline without network"
            ) from exc
        self._wandb = wandb

    def log(self, step: int, values: dict) -> None:
        self._guarded(lambda: self.run.log(finite_numbers(values), step=step))

    def log_episodes(self, step: int, episodes: list) -> None:
        rows = episode_rows(step, episodes, self.episodes_per_update)
        if rows:
            self._guarded(
                lambda: self.run.log({"episodes": self._wandb.Table(columns=TABLE_COLUMNS, data=rows)}, step=step)
            )

    def log_summary(self, values: dict) -> None:
        self._guarded(lambda: self.run.summary.update(values))

    def close(self) -> None:
        self._guarded(self.run.finish)

    def _guarded(self, call) -> None:
        if self.run is None:
            return
        try:
            call()
        except Exception as exc:  # a W&B fault must not end a training run
            log.warning("W&B logging failed and is off for the rest of this process: %s", exc)
            self.run = None
