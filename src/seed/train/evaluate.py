"""Evaluation on fixed panels: plain prompt, temperature 0.4, one episode per task seed 0..N-1 of each split."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from seed.types import Episode

if TYPE_CHECKING:  # annotations only
    from seed.train.components import Components


def success_table(episodes: list[Episode]) -> dict:
    """Success rate with its standard error, overall and per task type."""

    def summary(eps: list[Episode]) -> dict:
        n = len(eps)
        p = sum(e.won for e in eps) / n if n else 0.0
        return {"success": p, "se": math.sqrt(p * (1 - p) / n) if n else 0.0, "n": n}

    by_type: dict[str, list[Episode]] = defaultdict(list)
    for e in episodes:
        by_type[e.task_type or "all"].append(e)
    return {
        "overall": summary(episodes),
        "per_task_type": {t: summary(v) for t, v in sorted(by_type.items())},
        "mean_steps": sum(len(e.steps) for e in episodes) / max(1, len(episodes)),
        "invalid_rate": sum(e.num_invalid for e in episodes) / max(1, sum(len(e.steps) for e in episodes)),
    }


def evaluate(
    components: Components,
    splits: list[str] | None = None,
    episodes: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict:
    cfg = components.cfg
    results = {}
    for split in splits or cfg.eval.splits:
        collector = components.collector(split)
        eps = collector.collect(
            components.rollout_backend(),
            list(range(episodes or cfg.eval.episodes)),
            1,
            components.eval_sampling(),
            id_prefix=f"eval-{split}-",
            progress=progress,
        )
        collector.close()
        results[split] = success_table(eps)
        results[split]["episodes"] = eps
    return results


def format_table(results: dict) -> str:
    lines = [f"{'split':<14}{'task type':<34}{'success':>9}{'± se':>8}{'n':>5}"]
    for split, r in results.items():
        o = r["overall"]
        lines.append(f"{split:<14}{'(all)':<34}{o['success']:>9.3f}{o['se']:>8.3f}{o['n']:>5}")
        for t, s in r["per_task_type"].items():
            lines.append(f"{'':<14}{t:<34}{s['success']:>9.3f}{s['se']:>8.3f}{s['n']:>5}")
    return "\n".join(lines)
