"""GPU smoke check for the scale-out path (run by benchmarks/gpu_smoke.sh on a GPU machine; never by the tests).

On one GPU, with a small random-init Llama saved to a temporary folder (no download):
  1. rollouts: 64 prompts decoded by a generation engine (token ids in, token ids + log-probs out): vLLM where it
     is installed, else the HF replica that `generation.workers` runs (a GPU machine without a registry cannot
     install vLLM; the JSON's "engine" says which ran);
  2. an FSDP2 update (world size 1, NCCL) of the HF model on those rollouts with seed's policy_update;
  3. weight sync: the updated weights loaded into the running engine, whose scores must then match the
     trainer's (bf16 tolerance) and differ from the pre-update scores.
Prints timings and the largest differences; writes benchmarks/results/gpu_smoke.json.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path

import torch


def main() -> None:
    from seed.dist.fsdp import DataParallel, full_state_dict, init_process_group, shard_policy
    from seed.dist.generation import GenerationWorker
    from seed.models import HFBackend, Sampling, load_tokenizer
    from seed.models.load import tiny_model
    from seed.train.rl import Batch
    from seed.types import StepSample, StepState

    t_all = time.perf_counter()
    tok = load_tokenizer("tiny-random")
    folder = Path(tempfile.mkdtemp(prefix="seed-gpu-smoke-"))
    tiny_model(tok, seed=0, layers=4, hidden=256).save_pretrained(folder)
    tok.save_pretrained(folder)
    report: dict = {}

    report["engine"] = "vllm" if importlib.util.find_spec("vllm") else "hf"
    t0 = time.perf_counter()
    engine = GenerationWorker(
        str(folder), "cuda", "bf16", 0, None, engine=report["engine"], gpu_memory_utilization=0.2, max_model_len=1024
    )
    report["engine_start_s"] = time.perf_counter() - t0
    prompts = [tok.encode(f"Task {i}: push the box to the target. Answer:") for i in range(64)]
    t0 = time.perf_counter()
    gens = engine.generate(prompts, Sampling(temperature=1.0, max_new_tokens=64, stop=()), batch_size=64)
    report["engine_generate_s"] = time.perf_counter() - t0
    report["generated_tokens"] = sum(len(g.ids) for g in gens)

    init_process_group(0, 1, backend="nccl")
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).cuda()
    policy = HFBackend(model, tok, device="cuda", precision="bf16")
    responses = [g.ids for g in gens if g.ids]
    kept = [p for p, g in zip(prompts, gens) if g.ids]
    before = engine.logprobs(kept, responses, 8192)
    trainer_before = policy.logprobs(kept, responses)
    report["max_abs_diff_engine_vs_trainer_before"] = max(
        abs(a - b) for x, y in zip(before, trainer_before) for a, b in zip(x, y)
    )
    policy = shard_policy(policy)
    samples = [
        StepSample(StepState("sokoban", "t", "o", []), p, r, [0.0] * len(r), "", "", True, 0.0)
        for p, r in zip(kept, responses)
    ]
    adv = torch.randn(len(samples))
    from types import SimpleNamespace

    from seed.config import load_config
    from seed.train.optim import make_optimizer
    from seed.train.rl import policy_update

    cfg = load_config("tiny", ["model.device=cuda", "algo.kl_coef=0", "algo.lr=1e-3"])
    comps = SimpleNamespace(
        cfg=cfg,
        policy=policy,
        tokenizer=policy.tokenizer,
        reference=None,
        scoring_reference=lambda: None,
        release_reference=lambda: None,
    )  # no KL reference
    optimizer = make_optimizer(model, cfg)
    t0 = time.perf_counter()
    stats = policy_update(comps, optimizer, Batch(samples, adv), dp=DataParallel())
    torch.cuda.synchronize()
    report["fsdp_update_s"] = time.perf_counter() - t0
    report["update_loss"] = stats["train/loss"]

    t0 = time.perf_counter()
    engine.load_weights(full_state_dict(model))
    report["weight_sync_s"] = time.perf_counter() - t0
    after = engine.logprobs(kept, responses, 8192)
    trainer_after = policy.logprobs(kept, responses)
    report["max_abs_diff_engine_vs_trainer_after"] = max(
        abs(a - b) for x, y in zip(after, trainer_after) for a, b in zip(x, y)
    )
    report["max_abs_change_engine_scores"] = max(abs(a - b) for x, y in zip(after, before) for a, b in zip(x, y))
    report["total_s"] = time.perf_counter() - t_all
    report["gpu"] = torch.cuda.get_device_name(0)
    ok = report["max_abs_diff_engine_vs_trainer_after"] < 0.1 and report["max_abs_change_engine_scores"] > 1e-3
    report["passed"] = ok
    print(json.dumps(report, indent=2))
    out = Path(os.environ.get("OUT", Path(__file__).parent / "results")) / "gpu_smoke.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
