"""Sampling one token per row: `torch.multinomial` against seed's inverse-CDF sampler, alone and inside decoding.

    cd benchmarks && python sampler.py [--repeats 5]

1. The op alone on [rows, 49,152] logits (SmolLM2's vocabulary), best of 30 calls.
2. Decoding with the bundled SmolLM2-135M: 16 prompts of ~20 random tokens, 32 sampled tokens each (so decoding,
   not prefill, dominates), the two samplers interleaved; median of `--repeats`.
3. That both draw the same distribution: frequencies over 200,000 draws from a 5-token softmax, T = 1 and 0.5.

Prints a table, writes results/sampler.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import torch

import seed.models.backend as backend
from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)
from seed.models.backend import HFBackend, Sampling
from seed.models.decoding import sample_tokens
from seed.models.load import load_model, load_tokenizer


def multinomial(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> torch.Tensor:
    return torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator).squeeze(-1)


SAMPLERS = {"multinomial": multinomial, "inverse_cdf": sample_tokens}


def op_ms(sampler, rows: int, calls: int = 30) -> float:
    logits, g = torch.randn(rows, 49_152) * 3, torch.Generator().manual_seed(0)
    sampler(logits, 1.0, g)
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter()
        sampler(logits, 1.0, g)
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def frequencies(sampler, temperature: float, draws: int = 200_000) -> list[float]:
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0]).expand(draws, 5)
    drawn = sampler(logits, temperature, torch.Generator().manual_seed(0))
    return (torch.bincount(drawn, minlength=5).double() / draws).tolist()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    op = {name: {rows: op_ms(fn, rows) for rows in (1, 4, 16, 64)} for name, fn in SAMPLERS.items()}
    print(f"{'op alone, ms':<16}" + "".join(f"{f'{r} rows':>10}" for r in (1, 4, 16, 64)))
    for name, by_rows in op.items():
        print(f"{name:<16}" + "".join(f"{ms:>10.2f}" for ms in by_rows.values()))

    tok = load_tokenizer("smollm2-135m-instruct")
    be = HFBackend(load_model("smollm2-135m-instruct", tok), tok)
    rng = random.Random(0)
    prompts = [[rng.randint(100, 20_000) for _ in range(rng.randint(20, 24))] for _ in range(16)]
    sampling = Sampling(temperature=1.0, max_new_tokens=32, stop=())
    be.generate(prompts, sampling)  # warm-up
    decode: dict[str, list[dict]] = {name: [] for name in SAMPLERS}
    for _ in range(args.repeats):
        for name, fn in SAMPLERS.items():
            backend.sample_tokens = fn  # the decode loop looks the sampler up at module level
            t0 = time.perf_counter()
            gens = be.generate(prompts, sampling)
            decode[name].append({"seconds": time.perf_counter() - t0, "tokens": sum(len(g.ids) for g in gens)})
    backend.sample_tokens = sample_tokens
    median = {name: statistics.median(r["seconds"] for r in rows) for name, rows in decode.items()}
    speedup = median["multinomial"] / median["inverse_cdf"]
    print(
        f"decoding 16 rows x 32 tokens, median of {args.repeats}: multinomial {median['multinomial']:.2f}s, "
        f"inverse CDF {median['inverse_cdf']:.2f}s ({speedup:.2f}x)"
    )

    target = torch.softmax(torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0]), -1)
    dist = {}
    for temperature in (1.0, 0.5):
        expected = torch.softmax(target.log() / temperature, -1).tolist()
        dist[str(temperature)] = {
            "expected": expected,
            **{name: frequencies(fn, temperature) for name, fn in SAMPLERS.items()},
        }
        worst = max(abs(f - e) for name in SAMPLERS for f, e in zip(dist[str(temperature)][name], expected))
        print(f"T = {temperature}: largest frequency error over 200,000 draws {worst:.4f}")
    out = Path(__file__).parent / "results" / "sampler.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                **provenance(),
                "op_ms": op,
                "decode": decode,
                "decode_median_s": median,
                "decode_speedup": speedup,
                "distribution": dist,
            },
            indent=2,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
