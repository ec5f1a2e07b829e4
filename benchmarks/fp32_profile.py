"""Where a CPU run's time goes, per precision: the operators of one training micro-batch and of one decode batch.

CPUs without AVX-512 BF16 run the default on the fp32 path (`precision: auto`). This profiles the two kinds of work
every phase is made of, on the bundled SmolLM2-135M under the allocator the `seed` command uses, with
`torch.profiler` (self CPU time per operator, summed over calls):

- a training micro-batch (forward with activation checkpointing + backward, the chunked LM head's log-probs and
  entropy) of the RL update's shape: 4 prompts of 420 tokens sharing 300, 60 response tokens each;
- a decode batch as the analysis runs it: 16 prompts of 400-700 tokens, greedy, 32 new tokens, timed as prefill
  (one new token) and per decode step;
- the machine's GEMM rate on a 3200 x 576 x 1536 product (a prefill's MLP shape);
- attention alone, SmolLM2's heads (9 query, 3 key/value, 64 dims) for 16 rows: a 550-token prefill through the
  flash kernel with a padding mask (what a bucketed batch runs), causal without a mask, and as plain matmul +
  softmax + matmul; one decode query over a 570-token reserved cache, GQA-packed as transformers calls the flash
  kernel, and as matmuls.

    cd benchmarks && python fp32_profile.py [--precisions fp32 bf16] [--out results/fp32_profile.json]

bf16 is measured only where the CPU has native bf16 matmuls (elsewhere it is ~30x slower and no phase runs it).
Prints the tables and writes the JSON (each operator's share of the profiled step, its calls and milliseconds).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)

TRAIN_SHAPE = (4, 420, 300, 60)  # rows, prompt tokens, of them shared by every row, response tokens
DECODE_ROWS, DECODE_PROMPT, DECODE_NEW = 16, 400, 32
TOP = 8  # operators listed per profile


def gemm_gflops(dtype) -> float:
    import torch

    a, b = torch.randn(3200, 576, dtype=dtype), torch.randn(576, 1536, dtype=dtype)
    return 2 * 3200 * 576 * 1536 / (_ms(lambda: a @ b, 20) / 1e3) / 1e9


def _ms(fn, reps: int) -> float:
    for _ in range(2):
        fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e3


def attention_ms(dtype) -> dict:
    """Milliseconds per call of one layer's attention, per kernel (see the module docstring)."""
    import torch
    import torch.nn.functional as F

    rows, heads, kv_heads, dim, length, cache = 16, 9, 3, 64, 550, 570
    groups, scale = heads // kv_heads, dim**-0.5

    def matmul_attention(q, k, v, mask):
        scores = (q @ k.transpose(-1, -2) * scale).masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, -1, dtype=torch.float32).to(dtype) @ v

    q = torch.randn(rows, heads, length, dim, dtype=dtype)
    k, v = (torch.randn(rows, heads, length, dim, dtype=dtype) for _ in range(2))  # repeated to the query heads
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    padded = causal.expand(rows, 1, length, length).clone()
    padded[: rows // 4, :, :, :40] = False  # a quarter of the rows left-padded by 40 tokens
    reserved_k, reserved_v = (torch.randn(rows, kv_heads, cache + 230, dim, dtype=dtype) for _ in range(2))
    ck, cv = reserved_k[:, :, :cache], reserved_v[:, :, :cache]  # the reserved cache's view, as decoding reads it
    packed_q = torch.randn(rows, kv_heads, groups, dim, dtype=dtype)  # one query per head, packed per K/V head
    step_mask = torch.ones(rows, 1, groups, cache, dtype=torch.bool)
    return {
        "prefill_flash_padding_mask": _ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=padded), 3),
        "prefill_flash_causal": _ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), 3),
        "prefill_matmul": _ms(lambda: matmul_attention(q, k, v, padded), 3),
        "decode_flash_packed_gqa": _ms(
            lambda: F.scaled_dot_product_attention(packed_q, ck, cv, attn_mask=step_mask), 30
        ),
        "decode_matmul": _ms(lambda: matmul_attention(packed_q, ck, cv, step_mask), 30),
    }


def top_operators(prof, total_ms: float) -> list[dict]:
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:TOP]
    return [
        {
            "op": e.key,
            "calls": e.count,
            "ms": round(e.self_cpu_time_total / 1e3, 1),
            "share": round(e.self_cpu_time_total / 1e3 / total_ms, 3),
        }
        for e in rows
    ]


def profiled(step) -> tuple[list[dict], float]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    total_ms = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e3
    return top_operators(prof, total_ms), total_ms


def measure(precision: str) -> dict:
    import torch

    from seed.models import SMOLLM2, load_model, load_tokenizer
    from seed.models.backend import HFBackend, Sampling
    from seed.models.checkpointing import enable_activation_checkpointing

    torch.manual_seed(0)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    tokenizer = load_tokenizer(SMOLLM2)
    model = load_model(SMOLLM2, tokenizer)
    backend = HFBackend(model, tokenizer, precision=precision)
    rng = random.Random(0)
    vocab = len(tokenizer) - 1

    def ids(n: int) -> list[int]:
        return [rng.randrange(vocab) for _ in range(n)]

    rows, prompt_len, shared_len, response_len = TRAIN_SHAPE
    prefix = ids(shared_len)
    prompts = [prefix + ids(prompt_len - shared_len) for _ in range(rows)]
    responses = [ids(response_len) for _ in range(rows)]
    enable_activation_checkpointing(model)
    model.train()

    def train_step() -> None:
        logps, mask, entropy = backend.forward_logps(prompts, responses, with_entropy=True)
        loss = -(logps * mask).sum() / mask.sum() - 1e-3 * (entropy * mask).sum() / mask.sum()
        loss.backward()
        model.zero_grad(set_to_none=True)

    train_step()  # warm: kernels chosen, allocator primed
    seconds = []
    for _ in range(2):
        t0 = time.perf_counter()
        train_step()
        seconds.append(time.perf_counter() - t0)
    train_ops, train_ms = profiled(train_step)

    model.eval()
    decode_prompts = [ids(DECODE_PROMPT + 20 * i) for i in range(DECODE_ROWS)]
    one = Sampling(greedy=True, max_new_tokens=1, stop=())
    full = Sampling(greedy=True, max_new_tokens=DECODE_NEW, stop=())
    backend.generate(decode_prompts[:2], one, batch_size=DECODE_ROWS)
    t0 = time.perf_counter()
    backend.generate(decode_prompts, one, batch_size=DECODE_ROWS)
    prefill_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    backend.generate(decode_prompts, full, batch_size=DECODE_ROWS)
    generate_s = time.perf_counter() - t0
    decode_ops, decode_ms = profiled(lambda: backend.generate(decode_prompts, full, batch_size=DECODE_ROWS))
    return {
        "precision": precision,
        "gemm_gflops": round(gemm_gflops(dtype), 1),
        "attention_ms_per_layer_call": {k: round(v, 2) for k, v in attention_ms(dtype).items()},
        "train_micro_batch": {
            "shape": dict(zip(("rows", "prompt_tokens", "shared_prompt_tokens", "response_tokens"), TRAIN_SHAPE)),
            "seconds": [round(s, 2) for s in seconds],
            "profiled_ms": round(train_ms),
            "top_operators": train_ops,
        },
        "decode_batch": {
            "rows": DECODE_ROWS,
            "prompt_tokens": sum(len(p) for p in decode_prompts),
            "new_tokens": DECODE_NEW,
            "prefill_s": round(prefill_s, 2),
            "generate_s": round(generate_s, 2),
            "ms_per_decode_step": round((generate_s - prefill_s) / (DECODE_NEW - 1) * 1e3, 1),
            "profiled_ms": round(decode_ms),
            "top_operators": decode_ops,
        },
    }


def print_result(r: dict) -> None:
    t, d = r["train_micro_batch"], r["decode_batch"]
    print(f"\n{r['precision']}: GEMM {r['gemm_gflops']:.0f} GFLOP/s")
    kernels = r["attention_ms_per_layer_call"]
    print("  attention, ms per layer call: " + ", ".join(f"{k} {v}" for k, v in kernels.items()))
    print(f"  training micro-batch: {t['seconds']} s (fwd + checkpointed bwd)")
    for op in t["top_operators"]:
        print(f"    {op['share']:6.1%}  {op['ms']:9.1f} ms  {op['calls']:6d} calls  {op['op'][:70]}")
    print(
        f"  decode {d['rows']} x {d['prompt_tokens'] // d['rows']} tokens: prefill {d['prefill_s']} s, "
        f"{d['ms_per_decode_step']} ms per decode step"
    )
    for op in d["top_operators"]:
        print(f"    {op['share']:6.1%}  {op['ms']:9.1f} ms  {op['calls']:6d} calls  {op['op'][:70]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "fp32_profile.json"))
    args = ap.parse_args()
    from seed.allocator import reexec_under_tcmalloc
    from seed.models.precision import cpu_supports_bf16

    reexec_under_tcmalloc([sys.executable, *sys.argv])  # the allocator the `seed` command runs under
    precisions = [p for p in args.precisions if p == "fp32" or cpu_supports_bf16()]
    results = [measure(p) for p in precisions]
    for r in results:
        print_result(r)
    Path(args.out).write_text(json.dumps({**provenance(), "results": results}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
