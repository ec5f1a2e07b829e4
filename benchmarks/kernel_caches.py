"""RSS and speed against the size of oneDNN's kernel caches, on batches whose shapes change every iteration.

PyTorch's CPU matmuls keep one compiled oneDNN kernel per distinct shape, in two caches (oneDNN's primitive
cache, `ONEDNN_PRIMITIVE_CACHE_CAPACITY`, and ideep's, `LRU_CACHE_CAPACITY`; 1024 entries each by default). RL
batches change shape every update, so the caches keep filling. `import seed` bounds both at 64 unless the user
set them; this script measures why. Each setting runs in a fresh process (the variables are read once): SmolLM2
samples a batch of random prompts, then scores it with a forward and backward and an AdamW step; the C heap is
trimmed and RSS read after every iteration.

    python benchmarks/kernel_caches.py [--iterations 16] [--capacities 1024 256 64 16]

Prints RSS slope (MB/iteration, after the first 3) and seconds per iteration for each capacity; writes
benchmarks/results/kernel_caches.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from fit import slope  # benchmarks/fit.py
from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)

WORKER = r"""
import json, random, sys, time
import torch
from seed.models import HFBackend, Sampling, load_model, load_tokenizer
from seed.train.metrics import rss_mb, trim_heap
torch.manual_seed(0); random.seed(0)
tok = load_tokenizer("smollm2-135m-instruct")
backend = HFBackend(load_model("smollm2-135m-instruct", tok), tok, precision="auto")
opt = torch.optim.AdamW(backend.model.parameters(), lr=1e-6)
t0, rows = time.perf_counter(), []
for it in range(int(sys.argv[1])):
    prompts = [[random.randint(10, 40000) for _ in range(random.randint(100, 300))]
               for _ in range(random.randint(4, 8))]
    gens = backend.generate(prompts, Sampling(max_new_tokens=random.randint(10, 30), stop=()))
    logp, mask, _ = backend.forward_logps(prompts, [g.ids or [1] for g in gens])
    (-(logp * mask).sum() / mask.sum()).backward()
    opt.step(); opt.zero_grad(set_to_none=True)
    del logp, mask, gens
    trim_heap()
    rows.append({"iteration": it + 1, "rss_mb": rss_mb(), "seconds": time.perf_counter() - t0})
print(json.dumps(rows))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=16)
    ap.add_argument("--capacities", type=int, nargs="+", default=[1024, 256, 64, 16])
    args = ap.parse_args()
    results = {}
    for cap in args.capacities:
        env = {**os.environ, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(cap), "LRU_CACHE_CAPACITY": str(cap)}
        done = subprocess.run(
            [sys.executable, "-c", WORKER, str(args.iterations)], env=env, check=True, capture_output=True, text=True
        )
        rows = json.loads(done.stdout.strip().splitlines()[-1])
        tail = rows[3:]
        results[cap] = {
            "rows": rows,
            "rss_slope_mb_per_iteration": slope([r["iteration"] for r in tail], [r["rss_mb"] for r in tail]),
            "seconds_per_iteration": (rows[-1]["seconds"] - rows[2]["seconds"]) / len(tail),
        }
        r = results[cap]
        print(
            f"capacity {cap:>5}: RSS {rows[0]['rss_mb']:.0f} -> {rows[-1]['rss_mb']:.0f} MB, slope "
            f"{r['rss_slope_mb_per_iteration']:+.1f} MB/iteration, {r['seconds_per_iteration']:.1f} s/iteration",
            flush=True,
        )
    out = Path(__file__).parent / "results" / "kernel_caches.json"
    out.write_text(json.dumps({**provenance(), "iterations": args.iterations, "by_capacity": results}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
