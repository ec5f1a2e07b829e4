"""`seed report RUN_DIR --html`: one self-contained HTML file to *see* a run.

The page holds the run's curves, its skill stream and an episode browser whose response tokens are coloured by
the shift the skill caused, Δ = l_skill - l_rollout. Everything is read from the run directory as training wrote
it; the prompts are re-rendered with the one prompt renderer, so the page shows exactly what student and teacher
read. Each update's episodes are stored gzip-compressed and base64-encoded in their own block and unpacked by the
browser only when that update is opened, so a run of hundreds of updates still opens at once, from disk, offline.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import re
from pathlib import Path

from seed.agent import action_token_mask, render_messages
from seed.config import load_config
from seed.envs.base import action_tags
from seed.skills.analyzer import step_skill_text
from seed.storage import atomic_write_text, read_jsonl
from seed.train.metrics import read_metrics
from seed.types import StepState

TEMPLATE = Path(__file__).with_name("viewer.html")
_UPDATE_FILE = re.compile(r"update_(\d+)\.jsonl$")


def _round(values: list[float] | None, digits: int = 4) -> list[float] | None:
    return None if values is None else [round(float(v), digits) for v in values]


def _finite(row: dict) -> dict:
    """A metrics row without NaN/inf (JSON has no literal for them; the browser's parser would reject the page)."""
    return {k: v for k, v in row.items() if not (isinstance(v, float) and not math.isfinite(v))}


def _prompt_text(tokenizer, state: StepState, skill: str | None) -> str:
    return tokenizer.apply_chat_template(render_messages(state, skill), add_generation_prompt=True, tokenize=False)


def _prompt_views(tokenizer, state: StepState, skill: str | None) -> dict:
    """The student prompt, and where the teacher's skill block goes in it: the teacher prompt is the student's
    with one contiguous block inserted, so a position and the block's text recover it exactly."""
    student = _prompt_text(tokenizer, state, None)
    if skill is None:
        return {"prompt": student}
    teacher = _prompt_text(tokenizer, state, skill)
    at = next((i for i, (a, b) in enumerate(zip(student, teacher)) if a != b), len(student))
    return {"prompt": student, "skill_at": at, "skill_block": teacher[at : at + len(teacher) - len(student)]}


def _step_view(tokenizer, step: dict, skill: str | None) -> dict:
    tokens = [tokenizer.decode([t]) for t in step["response_ids"]]
    teacher = step.get("teacher_logps")
    scored_skill = skill if teacher is not None else None
    view = {
        "index": step["step_index"],
        "observation": step["state"]["observation"],
        "tokens": tokens,
        "action_tokens": action_token_mask(tokens, action_tags(step["state"]["env_name"])),
        "logp": _round(step["rollout_logps"]),
        "teacher_logp": _round(teacher),
        "response": step["response_text"],
        "action": step["action"],
        "valid": step["valid"],
        "reward": step["reward"],
        "advantage": step.get("advantage"),
        "expert_action": step.get("expert_action"),
        "truncated_prompt": step.get("truncated_prompt", False),
    }
    state = StepState(**{k: v for k, v in step["state"].items() if k != "images"})
    view.update(_prompt_views(tokenizer, state, scored_skill))
    return view


def _action_delta(steps: list[dict]) -> float | None:
    """Mean Δ over the episode's action tokens (None where the teacher scored none): the browser's sort key."""
    deltas = [
        t - lp
        for s in steps
        if s["teacher_logp"] is not None
        for t, lp, is_action in zip(s["teacher_logp"], s["logp"], s["action_tokens"])
        if is_action
    ]
    return round(sum(deltas) / len(deltas), 4) if deltas else None


def episode_view(tokenizer, episode: dict) -> dict:
    skill = episode.get("skill")
    step_skills = {int(k): v for k, v in (episode.get("step_skills") or {}).items()}
    steps = [
        _step_view(tokenizer, s, step_skill_text(skill, step_skills.get(s["step_index"])) if skill else None)
        for s in episode["steps"]
    ]
    return {
        "id": episode["episode_id"],
        "group": episode["group_id"],
        "task": episode["task"],
        "won": episode["won"],
        "score": episode["score"],
        "skill": skill,
        "analysis": episode.get("analysis"),
        "error": episode.get("error"),
        "action_delta": _action_delta(steps),
        "steps": steps,
    }


def update_files(run_dir: Path) -> dict[int, Path]:
    """Update number -> its episodes file. Training names the file by the 0-based loop index, so
    episodes/update_00000.jsonl holds the episodes of update 1, the update its metrics row carries."""
    out = {}
    for path in sorted((Path(run_dir) / "episodes").glob("update_*.jsonl")):
        match = _UPDATE_FILE.search(path.name)
        if match:
            out[int(match.group(1)) + 1] = path
    return out


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _evals(run_dir: Path, metrics: list[dict]) -> list[dict]:
    """Evaluation points as (label, update, split, success, se, n): before training, every `eval.every`, after."""
    last = max((r["update"] for r in metrics if "time/rollout" in r), default=0)
    points = [("initial", 0, run_dir / "eval_initial.json")]
    points += [(p.stem, int(p.stem.rsplit("_", 1)[1]), p) for p in sorted(run_dir.glob("eval_update_*.json"))]
    points.append(("final", last, run_dir / "eval_final.json"))
    rows = []
    for label, update, path in points:
        for split, result in (_read_json(path) or {}).items():
            overall = result.get("overall", {}) if isinstance(result, dict) else {}
            if "success" in overall:
                rows.append(
                    {
                        "label": label,
                        "update": update,
                        "split": split,
                        "success": overall["success"],
                        "se": overall.get("se", 0.0),
                        "n": overall.get("n"),
                    }
                )
    return rows


def overview(run_dir: Path) -> dict:
    """Everything but the episodes: config, summary, stages, metrics, evaluations and the skill stream."""
    config_text = (run_dir / "config.yaml").read_text() if (run_dir / "config.yaml").exists() else ""
    metrics = [_finite(r) for r in read_metrics(run_dir)]
    skills = read_jsonl(run_dir / "skills.jsonl") if (run_dir / "skills.jsonl").exists() else []
    stages = {p.stem: _read_json(p) for p in sorted(run_dir.glob("stage_*.json"))}
    beta = load_config(run_dir / "config.yaml").distill.beta  # the gate shown on hover is the update's gate
    return {
        "run_dir": str(run_dir),
        "config": config_text,
        "summary": _read_json(run_dir / "summary.json"),
        "stages": stages,
        "metrics": metrics,
        "evals": _evals(run_dir, metrics),
        "skills": skills,
        "beta": beta,
    }


def _packed(payload: dict) -> str:
    """gzip + base64 of the JSON: prompts repeat their template, so an update shrinks about tenfold."""
    return base64.b64encode(gzip.compress(json.dumps(payload, separators=(",", ":")).encode(), mtime=0)).decode()


def _script_safe(json_text: str) -> str:
    """JSON inside a <script> element: '</script>' would end it early and '<!--' could change how it is parsed, so
    every '<' (found only inside JSON strings) is written as the escape the JSON parser reads back as '<'."""
    return json_text.replace("<", "\\u003c")


def render_report(run_dir: Path, tokenizer) -> str:
    run_dir = Path(run_dir)
    head = overview(run_dir)
    files = update_files(run_dir)
    head["updates"] = sorted(files)
    blocks = []
    for update, path in sorted(files.items()):
        episodes = [episode_view(tokenizer, e) for e in read_jsonl(path)]
        packed = _packed({"update": update, "episodes": episodes})
        blocks.append(f'<script type="application/octet-stream" id="update-{update}">{packed}</script>')
    page = TEMPLATE.read_text()
    page = page.replace("/*OVERVIEW*/null", _script_safe(json.dumps(head, separators=(",", ":"))), 1)
    return page.replace("<!--UPDATES-->", "\n".join(blocks), 1)


def write_report(run_dir: Path, tokenizer, out: Path | None = None) -> Path:
    out = Path(out) if out else Path(run_dir) / "report.html"
    atomic_write_text(out, render_report(run_dir, tokenizer))
    return out
