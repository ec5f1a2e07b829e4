"""Stage 1 on a tiny model: oracle labels on disk, analyzer SFT with held-out metrics, resumable pipeline."""
import json
from pathlib import Path

from seed.cli import main
from seed.config import load_config
from seed.train.analyzer_sft import label_stage, sft_stage
from seed.train.components import build_components


def test_label_then_sft_reports_heldout_metrics(tmp_path):
    cfg = load_config("tiny", [f"run_dir={tmp_path}", "label.tasks=3", "label.group_size=2", "sft.epochs=1",
                               "sft.eval_generations=2", "sft.max_new_tokens=8", "sft.holdout=0.3"])
    comps = build_components(cfg, with_reference=False)
    labels = label_stage(comps)
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert len(rows) == 6 and all(r["parsed"] for r in rows)  # the oracle always produces a usable skill
    assert all("episode_success: failure" in r["prompt"] for r in rows if r["outcome"] == "failure")
    assert label_stage(comps) == labels and len(labels.read_text().splitlines()) == 6  # resumable, no relabel
    before = [p.detach().clone() for p in comps.policy.model.parameters()]
    stats = sft_stage(comps, labels)
    assert stats["sft/train_examples"] + stats["sft/heldout_examples"] == 6
    assert stats["sft/heldout_loss"] > 0 and 0.0 <= stats["sft/parse_rate"] <= 1.0
    assert any(not (p.detach() == b).all() for p, b in zip(comps.policy.model.parameters(), before))


def test_seed_run_with_label_and_sft_end_to_end(tmp_path):
    args = ["run", "tiny", f"run_dir={tmp_path}", "sft.enabled=true", "label.tasks=2", "label.group_size=2",
            "sft.epochs=1", "sft.eval_generations=1", "sft.max_new_tokens=4", "distill.kind=seed",
            "distill.skill_source=teacher", "train.updates=1", "eval.episodes=2"]
    assert main(args) == 0
    run = Path(tmp_path)
    for name in ("labels.jsonl", "stage_sft.json", "stage_warmup.json", "reference.pt", "skills.jsonl",
                 "eval_initial.json", "eval_final.json", "summary.json"):
        assert (run / name).exists(), name
    sft_stats = json.loads((run / "stage_sft.json").read_text())
    assert main(args) == 0  # a second run finds everything done
    assert json.loads((run / "stage_sft.json").read_text()) == sft_stats
