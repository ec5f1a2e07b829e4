"""GPU smoke check of the visual path (run by benchmarks/gpu_smoke.sh on a GPU machine; never by the tests).

The tiny random Qwen2.5-VL (`tiny-random-vl`) saved to a temporary folder with its tokenizer and image processor:
  1. the HF backend on CUDA: rollouts on visual Sokoban frames, and their log-probs re-scored (must agree);
  2. vLLM where it is installed: the same prompts with the frames as `multi_modal_data` (vLLM expands the image
     placeholders itself), decoded and scored; its scores of the HF rollouts must match the HF scorer's
     (bf16 tolerance).
Prints the figures; writes benchmarks/results/gpu_vision_smoke.json.
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    from seed.agent import render
    from seed.envs import make
    from seed.models import TINY_VL, HFBackend, Sampling, load_image_processor, load_model, load_tokenizer
    from seed.types import StepState

    tok = load_tokenizer(TINY_VL)
    model = load_model(TINY_VL, tok, seed=0)
    processor = load_image_processor(TINY_VL)
    folder = Path(tempfile.mkdtemp(prefix="seed-gpu-vision-"))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    processor.save_pretrained(folder)
    env = make("sokoban", "train", render="rgb")
    states = [StepState.after("sokoban", env.reset(s), [], 2, 0) for s in range(16)]
    prompts, images = [render(s, tok) for s in states], [s.images for s in states]
    report: dict = {}

    policy = HFBackend(model, tok, device="cuda", precision="bf16", image_processor=processor)
    t0 = time.perf_counter()
    gens = policy.generate(prompts, Sampling(temperature=1.0, max_new_tokens=32, stop=()), images=images)
    report["hf_generate_s"] = time.perf_counter() - t0
    responses = [g.ids or [tok.eos_token_id] for g in gens]
    scored = policy.logprobs(prompts, responses, images=images)
    report["hf_rollout_vs_score_max_abs"] = max(
        abs(a - b) for g, s in zip(gens, scored) for a, b in zip(g.logps, s[: len(g.ids)])
    )
    report["engine"] = "vllm" if importlib.util.find_spec("vllm") else "none"
    if report["engine"] == "vllm":
        from seed.models.vllm_backend import VLLMBackend

        t0 = time.perf_counter()
        engine = VLLMBackend(str(folder), tok, gpu_memory_utilization=0.2, max_model_len=2048)
        report["vllm_start_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        engine.generate(prompts, Sampling(temperature=1.0, max_new_tokens=32, stop=()), images=images)
        report["vllm_generate_s"] = time.perf_counter() - t0
        vllm_scored = engine.logprobs(prompts, responses, images=images)
        report["vllm_vs_hf_score_max_abs"] = max(abs(a - b) for s, v in zip(scored, vllm_scored) for a, b in zip(s, v))
    print(json.dumps(report, indent=2))
    out = Path(__file__).resolve().parent / "results" / "gpu_vision_smoke.json"
    out.write_text(json.dumps(report, indent=2))
    if report["hf_rollout_vs_score_max_abs"] > 0.1 or report.get("vllm_vs_hf_score_max_abs", 0.0) > 0.2:
        raise SystemExit("the visual path's log-probs disagree beyond bf16 tolerance")


if __name__ == "__main__":
    main()
