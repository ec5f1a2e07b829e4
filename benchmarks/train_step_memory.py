"""Peak memory and time of one training step (forward, backward, AdamW step) of the bundled model, per setting.

The CPU default peaks in its training phases (format warm-up, analyzer SFT, RL update) at the end of a training
forward, where fp32 weights, their gradients and AdamW's moments sit beside the activations. This measures the
levers on that fixed part one at a time, each setting in its own process (run under tcmalloc, as the `seed` command
is), on micro-batches of the shapes those phases train on, with activation checkpointing on (as in the default):

- `autocast_cache_off`: bf16 autocast keeps a bf16 copy of every weight it casts until the autocast region ends,
  and a training forward is one region, although checkpointing recomputes each layer (and re-casts its weights) in
  backward anyway. This setting turns the cache off for forwards with gradients.

    cd benchmarks && python train_step_memory.py [--steps 3] [--out results/train_step_memory.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)

SHAPES = {  # name -> (rows, prompt tokens, of them shared by every row, response tokens)
    "update": (4, 420, 300, 60),  # a packed RL micro-batch: one game's states under one instruction prefix
    "sft": (2, 900, 300, 160),  # analyzer SFT: long episode transcripts, the analysis as response
}
SETTINGS = {"as_is": {}, "autocast_cache_off": {"autocast_cache": False}}


def child(shape: str, steps: int, precision: str, autocast_cache: bool = True) -> dict:
    import random

    import torch

    from seed.models import SMOLLM2, load_model, load_tokenizer
    from seed.models.backend import HFBackend
    from seed.models.checkpointing import enable_activation_checkpointing
    from seed.train.metrics import _high_water_mb, rss_mb, trim_heap
    from seed.train.optim import adamw, guarded_step

    torch.manual_seed(0)
    tokenizer = load_tokenizer(SMOLLM2)
    model = load_model(SMOLLM2, tokenizer)
    backend = HFBackend(model, tokenizer, precision=precision)
    enable_activation_checkpointing(model)
    if not autocast_cache and backend.amp_dtype is not None:
        backend.autocast = lambda: torch.autocast(
            device_type="cpu", dtype=backend.amp_dtype, cache_enabled=not torch.is_grad_enabled()
        )
    optimizer = adamw(model, lr=1e-6, weight_decay=0.0)
    params = [p for p in model.parameters() if p.requires_grad]
    rows, prompt_len, shared_len, response_len = SHAPES[shape]
    rng = random.Random(0)
    vocab = len(tokenizer) - 1

    def ids(n: int) -> list[int]:
        return [rng.randrange(vocab) for _ in range(n)]

    prefix = ids(shared_len)
    prompts = [prefix + ids(prompt_len - shared_len) for _ in range(rows)]
    responses = [ids(response_len) for _ in range(rows)]
    model.train()
    trim_heap()
    start_mb = rss_mb()
    peaks, seconds = [], []
    for _ in range(steps):
        trim_heap()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        t0 = time.perf_counter()
        logps, mask, entropy = backend.forward_logps(prompts, responses, with_entropy=True)
        loss = -(logps * mask).sum() / mask.sum() - 1e-3 * (entropy * mask).sum() / mask.sum()
        loss.backward()
        guarded_step(optimizer, params, 1.0, float(loss))
        seconds.append(time.perf_counter() - t0)
        peaks.append(_high_water_mb())
    return {
        "start_mb": start_mb,
        "peak_mb": peaks,
        "peak_above_start_mb": [p - start_mb for p in peaks],
        "seconds": seconds,
        "autocast_dtype": str(backend.amp_dtype),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    ap.add_argument("--out", default="results/train_step_memory.json")
    ap.add_argument("--child", nargs=2, metavar=("SHAPE", "SETTING"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        shape, setting = args.child
        print(json.dumps(child(shape, **SETTINGS[setting], steps=args.steps, precision=args.precision)))
        return
    from seed.allocator import reexec_under_tcmalloc

    reexec_under_tcmalloc([sys.executable, *sys.argv])  # the children inherit the allocator the `seed` command uses
    results: dict = {}
    for shape in SHAPES:
        for setting in SETTINGS:
            cmd = [
                sys.executable,
                __file__,
                "--steps",
                str(args.steps),
                "--precision",
                args.precision,
                "--child",
                shape,
                setting,
            ]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            results.setdefault(shape, {})[setting] = row = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{shape:<7} {setting:<20} start {row['start_mb']:>6.0f} MB  peak {max(row['peak_mb']):>6.0f} MB "
                f"(+{max(row['peak_above_start_mb']):.0f})  step {min(row['seconds']):.1f}-"
                f"{max(row['seconds']):.1f} s  ({row['autocast_dtype']})",
                flush=True,
            )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "shapes": SHAPES,
                "settings": SETTINGS,
                "steps": args.steps,
                "precision": args.precision,
                "results": results,
                "provenance": provenance(),
            },
            indent=2,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
