"""Peak memory and time of the LM head on the prefill's last positions: a strided slice against a contiguous copy.

A prefill needs each prompt's next-token logits only. The model's own `logits_to_keep=1` hands the head the
strided slice `hidden[:, -1:, :]`; a bf16 linear on CPU then computes the logits of every prompt position. The
backend now copies the last positions first. Part 1 times the head alone on both inputs, part 2 the backend's
sampling on default-sized batches with the head fed either way (the model's own `logits_to_keep=1` forward, as the
backend called it before, against the backend's prefill now). Each measurement trims the C heap and resets the
kernel's high-water mark first.

    python benchmarks/prefill_head.py [--out results/prefill_head.json]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)
from seed.config import load_config
from seed.models import Sampling
from seed.models.backend import HFBackend
from seed.models.decoding import HFDecoder
from seed.models.kv_cache import cache_keyword, cache_of
from seed.train.components import build_components
from seed.train.metrics import _high_water_mb, rss_mb, trim_heap


def _reset() -> float:
    trim_heap()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return rss_mb()


def head_alone(batch: int, length: int, dtype: torch.dtype) -> dict:
    weight = torch.randn(49152, 576).to(dtype)
    hidden = torch.randn(batch, length, 576).to(dtype)
    out = {}
    for name, x in (("strided", hidden[:, -1:, :]), ("contiguous", hidden[:, -1:, :].contiguous())):
        base = _reset()
        t = time.perf_counter()
        F.linear(x, weight)
        out[name] = {"seconds": time.perf_counter() - t, "peak_above_mb": _high_water_mb() - base}
    return out


class ModelHeadDecoder(HFDecoder):
    """The prefill as the backend ran it before: the model's forward with `logits_to_keep=1`."""

    def _prefill(self, model, prompts, prefix=None):
        width = max(len(p) for p in prompts)
        shared = prefix.get_seq_length() if prefix is not None else 0
        ids = torch.full((len(prompts), width), self.tokenizer.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            ids[r, width - len(p) :] = torch.tensor(p)
            attn[r, width - len(p) :] = 1
        position_ids = shared + (attn.cumsum(-1) - 1).clamp_min(0)
        kw = {}
        if prefix is not None:
            attn = torch.cat([torch.ones((len(prompts), shared), dtype=attn.dtype), attn], dim=1)
            kw = {cache_keyword(model): prefix}
        with self.autocast():
            res = model(
                input_ids=ids, attention_mask=attn, position_ids=position_ids, use_cache=True, logits_to_keep=1, **kw
            )
        return cache_of(res), res.logits[:, -1, :].float()


def sampling(backend: HFBackend, prompts: list[list[int]]) -> dict:
    backend.decoder.generation_model()
    base = _reset()
    t = time.perf_counter()
    gens = backend.generate(prompts, Sampling(greedy=True, max_new_tokens=32, stop=()))
    return {"seconds": time.perf_counter() - t, "peak_above_mb": _high_water_mb() - base, "first_ids": gens[0].ids[:8]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/prefill_head.json")
    args = ap.parse_args()
    results = {"head": {}, "sampling": {}}
    for dtype in (torch.bfloat16, torch.float32):
        results["head"][str(dtype)] = head_alone(32, 300, dtype)
    cfg = load_config("default")
    comps = build_components(cfg, with_reference=False)
    now = comps.policy
    before = HFBackend(now.model, now.tokenizer, precision=cfg.model.precision, seed=cfg.seed)
    d = before.decoder
    before.decoder = ModelHeadDecoder(d.model, d.tokenizer, d.device, d.amp_dtype, d.generator, d.options)
    rng = random.Random(0)
    shared = [rng.randrange(100, 40000) for _ in range(200)]
    shapes = {"rollout: 32 prompts x 300 tokens": (32, 100), "analysis: 16 prompts x 1000 tokens": (16, 800)}
    for name, (n, extra) in shapes.items():
        prompts = [shared + [rng.randrange(100, 40000) for _ in range(extra)] for _ in range(n)]
        results["sampling"][name] = {
            "model head (before)": sampling(before, prompts),
            "contiguous head (now)": sampling(now, prompts),
        }
    print(f"precision {cfg.model.precision} -> {now.amp_dtype}")
    for dtype, row in results["head"].items():
        print(
            f"head alone, 32 x 300, {dtype}: strided {row['strided']['peak_above_mb']:.0f} MB "
            f"{row['strided']['seconds']:.3f} s; contiguous {row['contiguous']['peak_above_mb']:.0f} MB "
            f"{row['contiguous']['seconds']:.3f} s"
        )
    for name, row in results["sampling"].items():
        b, c = row["model head (before)"], row["contiguous head (now)"]
        print(
            f"{name}: before {b['peak_above_mb']:.0f} MB {b['seconds']:.2f} s; now {c['peak_above_mb']:.0f} MB "
            f"{c['seconds']:.2f} s; same tokens: {b['first_ids'] == c['first_ids']}"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**results, "precision": str(now.amp_dtype), "provenance": provenance()}, indent=2))
    print(f"saved {out}")


if __name__ == "__main__":
    main()
