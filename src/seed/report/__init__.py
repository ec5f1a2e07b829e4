"""`seed report RUN_DIR`: what a run did, per update, and where the skills shifted the policy most."""

from __future__ import annotations

from pathlib import Path

from seed.storage import read_jsonl
from seed.train.metrics import read_metrics

COLUMNS = (
    ("update", "update", "{:>6}"),
    ("rollout/success", "success", "{:>8.3f}"),
    ("rollout/invalid_rate", "invalid", "{:>8.3f}"),
    ("rollout/invalid_reinforced", "inv+", "{:>5}"),
    ("distill/parse_rate", "parse", "{:>7.3f}"),
    ("distill/skill_words", "words", "{:>7.1f}"),
    ("distill/delta_mean", "Δ mean", "{:>8.3f}"),
    ("distill/gate_mean", "gate", "{:>7.3f}"),
    ("distill/active_token_share", "active", "{:>7.3f}"),
    ("teacher/action/delta", "Δ act", "{:>8.3f}"),
    ("teacher/rest/delta", "Δ rest", "{:>8.3f}"),
    ("teacher/action/gate_open", "open", "{:>7.3f}"),
    ("teacher/skill_lift", "lift", "{:>8.3f}"),
    ("teacher/agree_auc", "auc", "{:>7.3f}"),
    ("time/rollout", "t_roll", "{:>7.1f}"),
    ("time/analysis", "t_anal", "{:>7.1f}"),
    ("time/rescore", "t_resc", "{:>7.1f}"),
    ("time/update", "t_upd", "{:>7.1f}"),
)


def update_table(run_dir: Path) -> str:
    rows = [r for r in read_metrics(run_dir) if "time/rollout" in r]
    cols = [c for c in COLUMNS if any(c[0] in r for r in rows)]
    lines = ["".join(f"{label:>{len(fmt.format(0)) if 'd' not in fmt else 6}}" for _, label, fmt in cols)]
    for r in rows:
        lines.append("".join(fmt.format(r[k]) if k in r else " " * 7 for k, _, fmt in cols))
    return "\n".join(lines)


def top_delta_tokens(run_dir: Path, tokenizer, k: int = 10) -> tuple[dict | None, list[tuple[float, str, int]]]:
    """The latest episode with a skill, and its k response tokens with the largest Δ = l_skill - l_rollout."""
    files = sorted((Path(run_dir) / "episodes").glob("update_*.jsonl"))
    for path in reversed(files):
        for ep in read_jsonl(path):
            if not ep.get("skill"):
                continue
            scored = []
            for step in ep["steps"]:
                if step.get("teacher_logps") is None:
                    continue
                for tok, lp, tlp in zip(step["response_ids"], step["rollout_logps"], step["teacher_logps"]):
                    scored.append((tlp - lp, tokenizer.decode([tok]), step["step_index"]))
            if scored:
                return ep, sorted(scored, reverse=True)[:k]
    return None, []
