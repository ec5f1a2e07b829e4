"""seed's GRPO update against TRL's GRPOTrainer: same prompts, model, completions, tokens budget and precision.

Both sides train SmolLM2-135M-Instruct (the same start weights) on the same single-turn prompts: the first step of
Sokoban training rooms, rendered by seed's one prompt renderer and given to TRL as the same chat messages. The
reward, shared by both, is 1 for a well-formed response whose action is the expert's first move, 0 for another
well-formed move and -0.1 for a malformed one. One update = generate `--group` completions for each of `--prompts`
prompts (temperature 1, at most `--max-tokens` new tokens), score them, group-normalised advantages, one
PPO-clip step with a KL(k3) term to the frozen start model (coef 0.01), AdamW lr 2e-5, grad clip 1, under bf16
autocast on CPU (TRL: `bf16=True, use_cpu=True`). Each side's first update is a warm-up and not counted.

    pip install -c requirements-cpu.txt trl      # TRL is only needed here
    python benchmarks/peer_trl.py [--weights runs/default] [--updates 4]

Prints the table and writes benchmarks/results/peer_trl.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)
from seed.agent.parse import parse_action
from seed.agent.render import render, render_messages
from seed.config import load_config
from seed.envs import make
from seed.models import Sampling
from seed.train.checkpoint import latest_checkpoint, load_checkpoint
from seed.train.components import build_components
from seed.train.optim import make_optimizer
from seed.train.rl import compute_advantages, policy_update
from seed.types import Episode, StepSample, StepState

ROOT = Path(__file__).resolve().parents[1]


def sokoban_prompts(n: int) -> list[dict]:
    """The first step of `n` training rooms: the state, its chat messages and the expert's first move."""
    env = make("sokoban", split="train", size=6, num_boxes=1, reverse_steps=4)
    rows = []
    for seed in range(n):
        obs = env.reset(10_000 + seed)
        state = StepState("sokoban", obs.task, obs.text, list(obs.admissible))
        rows.append({"state": state, "prompt": render_messages(state), "expert": env.expert_plan()[0]})
    return rows


def reward(text: str, expert: str) -> float:
    """Scored on the text up to the first `</action>`: neither side stops generating there (TRL's generate takes
    no stop strings), so both decode until EOS or the token budget and pay for the same tokens."""
    end = text.find("</action>")
    parsed = parse_action(text[: end + len("</action>")] if end >= 0 else text, ["up", "down", "left", "right"])
    if not parsed.valid:
        return -0.1
    return 1.0 if parsed.action == expert else 0.0


def load_start_weights(model, weights: str | None) -> str:
    ckpt = latest_checkpoint(Path(weights)) if weights else None
    if ckpt is None:
        return "base model"
    model.load_state_dict(load_checkpoint(ckpt)["model"])
    return str(ckpt)


def run_seed(args, rows: list[dict]) -> dict:
    tmp = tempfile.mkdtemp(prefix="seed-peer-")
    cfg = load_config(
        "default",
        [
            f"run_dir={tmp}",
            "distill.kind=none",
            "warmup.enabled=false",
            "sft.enabled=false",
            "algo.mini_batch_size=0",
            f"rollout.max_response_tokens={args.max_tokens}",
            "algo.entropy_coef=0",
            f"seed={args.seed}",
        ],
    )
    comps = build_components(cfg)
    start = load_start_weights(comps.policy.model, args.weights)
    if comps.reference is not None:
        comps.reference.model.load_state_dict(comps.policy.model.state_dict())
    optimizer = make_optimizer(comps.policy.model, cfg)
    sampling = Sampling(temperature=1.0, max_new_tokens=args.max_tokens, stop=())  # EOS only, as TRL
    times, tokens, rewards = [], [], []
    for update in range(args.updates + 1):
        batch_rows = rows[update * args.prompts : (update + 1) * args.prompts]
        t0 = time.perf_counter()
        prompt_ids = [render(r["state"], comps.tokenizer) for r in batch_rows]
        gens = comps.policy.generate([p for p in prompt_ids for _ in range(args.group)], sampling)
        episodes = []
        for i, g in enumerate(gens):
            row = batch_rows[i // args.group]
            r = reward(g.text, row["expert"])
            step = StepSample(row["state"], prompt_ids[i // args.group], g.ids, g.logps, g.text, "", r >= 0, r)
            episodes.append(
                Episode(f"u{update}-{i}", i // args.group, 0, row["state"].task, "sokoban", [step], won=r > 0, score=r)
            )
        batch = compute_advantages(episodes, cfg)
        policy_update(comps, optimizer, batch)
        dt = time.perf_counter() - t0
        if update > 0:
            times.append(dt)
            tokens.append(sum(len(g.ids) for g in gens))
            rewards.append(sum(e.score for e in episodes) / len(episodes))
        print(f"seed update {update}: {dt:.2f}s, {sum(len(g.ids) for g in gens)} completion tokens", flush=True)
    return {
        "start_weights": start,
        "seconds_per_update": times,
        "completion_tokens_per_update": tokens,
        "mean_reward": rewards,
    }


def run_trl(args, rows: list[dict]) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from seed.models import load_model, load_tokenizer

    tok = load_tokenizer("smollm2-135m-instruct")
    model = load_model("smollm2-135m-instruct", tok, seed=args.seed)
    start = load_start_weights(model, args.weights)
    n = (args.updates + 1) * args.prompts
    data = Dataset.from_list([{"prompt": r["prompt"], "expert": r["expert"]} for r in rows[:n]])

    def reward_fn(completions, expert, **_):
        return [reward(c[0]["content"], e) for c, e in zip(completions, expert)]

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self.t0 = [], 0.0

        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.times.append(time.perf_counter() - self.t0)
            print(f"trl update {len(self.times) - 1}: {self.times[-1]:.2f}s", flush=True)

    timer = StepTimer()
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-peer-"),
        per_device_train_batch_size=args.prompts * args.group,
        num_generations=args.group,
        gradient_accumulation_steps=1,
        num_iterations=1,
        max_steps=args.updates + 1,
        max_completion_length=args.max_tokens,
        temperature=1.0,
        learning_rate=2e-5,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.01,
        max_grad_norm=1.0,
        beta=0.01,
        epsilon=0.2,
        bf16=True,
        use_cpu=True,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=args.seed,
        shuffle_dataset=False,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=reward_fn, args=config, train_dataset=data, processing_class=tok, callbacks=[timer]
    )
    if trainer.ref_model is not None:  # TRL builds its reference from the hub id: give it the same start weights
        trainer.ref_model.load_state_dict(model.state_dict())
    trainer.train()
    logs = [h for h in trainer.state.log_history if "num_tokens" in h or "completions/mean_length" in h]
    lengths = [h.get("completions/mean_length", 0.0) * args.prompts * args.group for h in logs]
    return {
        "start_weights": start,
        "seconds_per_update": timer.times[1:],
        "completion_tokens_per_update": lengths[1:],
        "mean_reward": [h.get("reward", float("nan")) for h in logs][1:],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", default="runs/default", help="run directory whose latest checkpoint both start from")
    ap.add_argument("--updates", type=int, default=4, help="measured updates per side (after one warm-up update)")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    rows = sokoban_prompts((args.updates + 1) * args.prompts)
    results = {"seed": run_seed(args, rows), "trl": run_trl(args, rows)}
    print(f"\n{'':<6}{'s/update (median)':>18}{'completion tokens/update':>26}{'tokens/s':>10}{'mean reward':>13}")
    for name, r in results.items():
        s, t = statistics.median(r["seconds_per_update"]), statistics.mean(r["completion_tokens_per_update"])
        r["median_seconds_per_update"], r["mean_completion_tokens"] = s, t
        print(f"{name:<6}{s:>18.2f}{t:>26.1f}{t / s:>10.1f}{statistics.mean(r['mean_reward']):>13.3f}")
    ratio = results["trl"]["median_seconds_per_update"] / results["seed"]["median_seconds_per_update"]
    print(f"TRL / seed seconds per update: {ratio:.2f}x (above 1: seed is faster)")
    import transformers
    import trl

    record = {
        **provenance(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__},
        "settings": vars(args),
        "trl_over_seed_seconds_ratio": ratio,
        **results,
    }
    out = ROOT / "benchmarks" / "results" / "peer_trl.json"
    out.write_text(json.dumps(record, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
