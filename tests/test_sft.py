"""Stage 1 on a tiny model: oracle labels on disk, analyzer SFT with held-out metrics, resumable pipeline."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from seed.cli import main
from seed.config import load_config
from seed.skills import parse_analysis
from seed.train.analyzer_sft import label_stage, sft_stage, sft_target
from seed.train.components import build_components
from seed.train.metrics import read_metrics
from seed.train.optim import adamw, warmup_cosine


def test_label_then_sft_reports_heldout_metrics(tmp_path):
    cfg = load_config(
        "tiny",
        [
            f"run_dir={tmp_path}",
            "label.tasks=3",
            "label.group_size=2",
            "sft.epochs=1",
            "sft.eval_generations=2",
            "sft.max_new_tokens=8",
            "sft.holdout=0.3",
        ],
    )
    comps = build_components(cfg, with_reference=False)
    labels = label_stage(comps)
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert len(rows) == 6 and all(r["parsed"] for r in rows)  # the oracle always produces a usable skill
    assert all("episode_success: failure" in r["prompt"] for r in rows if r["outcome"] == "failure")
    for r in rows:  # the target is the parsed analysis as compact JSON, whatever wrapped the teacher's answer
        parsed = parse_analysis(r["raw"])
        assert json.loads(r["response"]) == {"episode_summary": parsed.summary, "episode_skill": parsed.skill}
    assert label_stage(comps) == labels and len(labels.read_text().splitlines()) == 6  # resumable, no relabel
    before = [p.detach().clone() for p in comps.policy.model.parameters()]
    stats = sft_stage(comps, labels)
    assert stats["sft/train_examples"] + stats["sft/heldout_examples"] == 6
    assert stats["sft/heldout_loss"] > 0 and 0.0 <= stats["sft/parse_rate"] <= 1.0
    assert any(not (p.detach() == b).all() for p, b in zip(comps.policy.model.parameters(), before))


def test_seed_run_with_label_and_sft_end_to_end(tmp_path):
    args = [
        "run",
        "tiny",
        f"run_dir={tmp_path}",
        "sft.enabled=true",
        "label.tasks=2",
        "label.group_size=2",
        "sft.epochs=1",
        "sft.eval_generations=1",
        "sft.max_new_tokens=4",
        "distill.kind=seed",
        "distill.skill_source=teacher",
        "train.updates=1",
        "eval.episodes=2",
    ]
    assert main(args) == 0
    run = Path(tmp_path)
    for name in (
        "labels.jsonl",
        "stage_sft.json",
        "stage_warmup.json",
        "reference.pt",
        "skills.jsonl",
        "eval_initial.json",
        "eval_final.json",
        "summary.json",
    ):
        assert (run / name).exists(), name
    sft_stats = json.loads((run / "stage_sft.json").read_text())
    if sys.platform.startswith("linux"):  # each phase's memory high-water mark, and the run's peak above them all
        summary = json.loads((run / "summary.json").read_text())
        phases = summary["peak_rss_by_phase_mb"]
        assert {"warmup", "label", "sft", "eval", "rollout", "distill", "update", "checkpoint"} <= set(phases)
        assert summary["peak_rss_mb"] + 1 >= max(phases.values()) > 0  # phases are rounded to MB
        assert sft_stats["memory/peak_sft_mb"] > 0
        row = [r for r in read_metrics(run) if r["update"] == 1][0]
        assert row["memory/peak_update_mb"] > 0 and row["memory/peak_distill_mb"] > 0
    assert main(args) == 0  # a second run finds everything done
    assert json.loads((run / "stage_sft.json").read_text()) == sft_stats


def test_sft_target_is_compact_json_of_the_parsed_fields():
    # a newline inside a string and a trailing comma
    raw = 'Here it is:\n```json\n{"episode_summary": "Won.", "episode_skill": "Push up,\n then left.",}\n```'
    assert sft_target(parse_analysis(raw)) == '{"episode_summary": "Won.", "episode_skill": "Push up, then left."}'


def test_warmup_then_cosine_schedule_by_hand():
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0, betas=(0.9, 0.95), weight_decay=0.01)
    schedule = warmup_cosine(opt, total_steps=20, warmup_ratio=0.1)  # 2 warm-up steps, then 18 of cosine
    lrs = []
    for _ in range(20):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    assert lrs[:3] == pytest.approx([0.5, 1.0, 1.0])
    assert lrs[11] == pytest.approx(0.5 * (1 + math.cos(math.pi * 9 / 18)))  # half way: 0.5
    assert lrs[19] == pytest.approx(0.5 * (1 + math.cos(math.pi * 17 / 18)))


def test_sft_optimizer_takes_the_official_settings(tmp_path, monkeypatch):
    import seed.train.analyzer_sft as sft

    made = {}
    real = torch.optim.AdamW

    def spy(params, **kw):
        made.update(kw)
        return real(params, **kw)

    monkeypatch.setattr(sft.torch.optim, "AdamW", spy)
    cfg = load_config(
        "tiny",
        [
            f"run_dir={tmp_path}",
            "label.tasks=1",
            "label.group_size=2",
            "sft.epochs=1",
            "sft.eval_generations=0",
            "sft.max_new_tokens=4",
        ],
    )
    comps = build_components(cfg, with_reference=False)
    sft_stage(comps, label_stage(comps))
    assert made["betas"] == (0.9, 0.95) and made["weight_decay"] == 0.01 and made["lr"] == cfg.sft.lr
    assert made["fused"] is True  # plain CPU parameters: the fused kernel, no model-sized temporaries


def test_fused_adamw_steps_as_the_multi_tensor_adamw():
    torch.manual_seed(0)
    fused_model, plain_model = torch.nn.Linear(8, 5), torch.nn.Linear(8, 5)
    plain_model.load_state_dict(fused_model.state_dict())
    plain_model.bias.requires_grad_(False)
    fused_model.bias.requires_grad_(False)  # frozen parameters stay out of the optimizer
    fused = adamw(fused_model, lr=0.1, weight_decay=0.01, betas=(0.9, 0.95))
    plain = torch.optim.AdamW([plain_model.weight], lr=0.1, weight_decay=0.01, betas=(0.9, 0.95), foreach=True)
    assert [p for g in fused.param_groups for p in g["params"]] == [fused_model.weight]
    for _ in range(3):
        x = torch.randn(4, 8)
        for model, opt in ((fused_model, fused), (plain_model, plain)):
            model(x).pow(2).sum().backward()
            opt.step()
            opt.zero_grad()
    torch.testing.assert_close(fused_model.weight, plain_model.weight)
    assert fused.state_dict()["state"][0].keys() == plain.state_dict()["state"][0].keys()  # checkpoints interchange


def test_format_replay_trains_every_warmup_demonstration_once_per_epoch(tmp_path, monkeypatch):
    from seed.config import ConfigError
    from seed.train.warmup import demonstrations

    with pytest.raises(ConfigError, match="sft.format_replay"):
        load_config(
            "tiny", [f"run_dir={tmp_path}", "warmup.enabled=false", "sft.enabled=true", "sft.format_replay=true"]
        )
    load_config("tiny", [f"run_dir={tmp_path}", "warmup.enabled=false", "sft.format_replay=true"])  # no SFT: no replay
    cfg = load_config(
        "tiny",
        [
            f"run_dir={tmp_path}",
            "label.tasks=2",
            "label.group_size=2",
            "sft.epochs=2",
            "sft.batch_size=2",
            "sft.holdout=0",
            "sft.eval_generations=0",
            "sft.max_new_tokens=4",
            "warmup.enabled=true",
            "warmup.episodes=3",
            "sft.format_replay=true",
        ],
    )
    comps = build_components(cfg, with_reference=False)
    labels = label_stage(comps)
    replay = demonstrations(
        comps,
        3,
        seed=cfg.seed,
        expert_share=cfg.warmup.expert_share,
        thought=cfg.warmup.thought,
        skill_share=cfg.warmup.skill_share,
    )
    seen = []
    real = comps.policy.forward_logps

    def spy(prompts, responses, **kw):
        if torch.is_grad_enabled():
            seen.extend(zip(map(tuple, prompts), map(tuple, responses)))
        return real(prompts, responses, **kw)

    monkeypatch.setattr(comps.policy, "forward_logps", spy)
    stats = sft_stage(comps, labels)
    assert stats["sft/replay_examples"] == len(replay) > 0
    for prompt, response, *_ in replay:  # the warm-up's own pairs, each trained once in each of the 2 epochs
        assert seen.count((tuple(prompt), tuple(response))) == 2
    assert len(seen) == 2 * (stats["sft/train_examples"] + len(replay))


def test_balanced_labels_keep_every_success_and_cap_the_failures():
    from seed.train.analyzer_sft import balanced

    rows = [{"episode_id": f"w{i}", "outcome": "success"} for i in range(3)] + [
        {"episode_id": f"l{i}", "outcome": "failure"} for i in range(20)
    ]
    assert balanced(rows, 0) == {r["episode_id"] for r in rows}  # 0: all
    kept = balanced(rows, 2)
    assert {"w0", "w1", "w2"} <= kept and len(kept) == 3 + 6
    assert balanced(rows, 2) == kept and balanced(list(reversed(rows)), 2) == kept  # by id, not by order
    assert len(balanced(rows[3:], 1.5)) == 2  # no success: as if there were one


def test_target_ids_span_the_skill_string_of_the_json():
    from seed.models.load import load_tokenizer
    from seed.train.analyzer_sft import NO_SPAN, target_ids

    tok = load_tokenizer(load_config("default", []).model.name)
    skill = "What works: when 'The box is 1 step up from you', take 'up'."
    for skill_first in (True, False):
        analysis = parse_analysis(json.dumps({"episode_summary": "The agent solved it.", "episode_skill": skill}))
        response = sft_target(analysis, skill_first)
        ids, (start, end) = target_ids(tok, response, weigh_skill=True)
        assert ids == tok.encode(response, add_special_tokens=False) + [tok.eos_token_id]
        spanned = tok.decode(ids[start:end])
        assert skill in spanned and len(spanned) <= len(skill) + 4  # at most the quote and comma merged into a token
        assert "agent solved" not in spanned
        assert target_ids(tok, response, weigh_skill=False) == (ids, NO_SPAN)
    assert target_ids(tok, "not json", weigh_skill=True)[1] == NO_SPAN


def test_skill_weight_teaches_the_skill_tokens_faster(tmp_path):
    """Same labels, same start, same steps: weighing the skill's tokens lowers their loss more than the plain mean."""
    from seed.train.analyzer_sft import target_ids

    def skill_nll(weight):
        cfg = load_config(
            "tiny",
            [
                f"run_dir={tmp_path / str(weight)}",
                "label.tasks=3",
                "label.group_size=2",
                "sft.epochs=2",
                "sft.lr=1e-3",
                "sft.holdout=0",
                "sft.eval_generations=0",
                "sft.max_new_tokens=4",
                f"sft.skill_weight={weight}",
                "warmup.enabled=false",
            ],
        )
        (tmp_path / str(weight)).mkdir()
        comps = build_components(cfg, with_reference=False)
        labels = label_stage(comps)
        sft_stage(comps, labels)
        rows = [json.loads(line) for line in labels.read_text().splitlines()]
        from seed.agent import prompt_ids

        total = count = 0.0
        with torch.no_grad():
            for r in rows:
                ids, (start, end) = target_ids(comps.tokenizer, r["response"], weigh_skill=True)
                logp, _, _ = comps.policy.forward_logps([prompt_ids(comps.tokenizer, r["prompt"])], [ids])
                total, count = total - logp[0, start:end].sum().item(), count + end - start
        return total / count

    assert skill_nll(8.0) < skill_nll(1.0)


def test_the_sft_token_budget_splits_micro_batches_not_the_step(tmp_path, monkeypatch):
    """sft.token_budget only sets how many sequences one forward holds: the step (gradients summed over the micro-
    batches) and so the trained weights are those of one micro-batch per step."""
    from seed.train import sft

    base = [
        f"run_dir={tmp_path}",
        "label.tasks=3",
        "label.group_size=2",
        "sft.epochs=1",
        "sft.batch_size=4",
        "sft.eval_generations=0",
        "sft.holdout=0.2",
        "algo.token_budget=100000",
    ]
    labels = label_stage(build_components(load_config("tiny", base), with_reference=False))
    sizes: list[int] = []
    split = sft.token_budget_batches
    monkeypatch.setattr(
        sft,
        "token_budget_batches",
        lambda lengths, budget: [sizes.append(len(m)) or m for m in split(lengths, budget)],
    )
    weights = {}
    for budget in (0, 1):  # 0: algo.token_budget, every batch in one forward; 1: one sequence per forward
        comps = build_components(load_config("tiny", [*base, f"sft.token_budget={budget}"]), with_reference=False)
        sizes.clear()
        sft_stage(comps, labels)
        weights[budget] = [p.detach().clone() for p in comps.policy.model.parameters()]
        assert max(sizes) == (1 if budget else 4)
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-4) for a, b in zip(weights[0], weights[1]))
