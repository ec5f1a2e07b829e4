"""What the resident memory of the RL update is made of: a census of live tensors beside RSS.

Runs the default pipeline, shortened (small warm-up, few labelled tasks, short panels, one update by default), in
this process under tcmalloc, and at the update's start, after every backward and after every optimizer step
records RSS, the kernel's high-water mark, the bytes of all live tensors (storages counted once), and those of the
policy's weights, its gradients, AdamW's moments, the KL reference and the bf16 decoding copy; the analyzer SFT is
counted before each optimizer step (after its micro-batches' backwards). Live tensors that none of these explain
are a copy something still holds. RSS above the live tensors is the runtime plus the allocator's free memory; with
`--release` each row then releases the allocator's free pages and reads RSS again, so the two are told apart (the
extra releases lower the phase peaks, so those are comparable only between runs without it).

    cd benchmarks && python memory_census.py [--updates 1] [--release] [--out PATH] [key=value ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
from pathlib import Path

from provenance import provenance  # benchmarks/provenance.py (scripts run from this folder)

SHORT = ["warmup.episodes=8", "warmup.epochs=1", "label.tasks=8", "eval.episodes=8"]


def mb(tensors) -> float:
    """Resident bytes: a parameter freed to the meta device (an offloaded reference) holds none."""
    return sum(t.numel() * t.element_size() for t in tensors if not t.is_meta) / 2**20


def live_tensor_mb() -> float:
    import torch

    seen, total = set(), 0
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            if storage.data_ptr() and storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
    return total / 2**20


def census(tag: str, components, optimizer, release: bool = False) -> dict:
    import torch

    from seed.train.metrics import _high_water_mb, rss_mb, trim_heap

    policy = components.policy
    moments = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)] if optimizer else []
    row = {
        "at": tag,
        "rss_mb": rss_mb(),
        "high_water_mb": _high_water_mb(),
        "weights_mb": mb(policy.model.parameters()),
        # read first: a gradient has no Python object (so the census cannot see it) until `.grad` is read
        "grads_mb": mb(p.grad for p in policy.model.parameters() if p.grad is not None),
        "adam_moments_mb": mb(moments),
        "reference_mb": mb(components.reference.model.parameters()) if components.reference else 0.0,
        "decoding_copy_mb": mb(policy.decoder._gen_model.parameters()) if policy.decoder._gen_model else 0.0,
    }
    row["live_tensors_mb"] = live_tensor_mb()
    known = sum(row[k] for k in ("weights_mb", "grads_mb", "adam_moments_mb", "reference_mb", "decoding_copy_mb"))
    row["unexplained_tensors_mb"] = row["live_tensors_mb"] - known
    row["rss_above_tensors_mb"] = row["rss_mb"] - row["live_tensors_mb"]
    if release:
        trim_heap()  # what the allocator kept of freed blocks goes back now; what stays is in use
        row["rss_after_release_mb"] = rss_mb()
    print(" ".join(f"{k}={v:.0f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="default")
    ap.add_argument("--updates", type=int, default=1)
    ap.add_argument("--out", default="results/memory_census.json")
    ap.add_argument("--release", action="store_true", help="release the allocator's free pages at every row")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    from seed.allocator import reexec_under_tcmalloc

    reexec_under_tcmalloc([sys.executable, *sys.argv])  # the allocator the `seed` command runs under
    from seed.config import load_config
    from seed.train import analyzer_sft, rl
    from seed.train.components import build_components
    from seed.train.metrics import phase_peaks_mb, phase_seconds
    from seed.train.pipeline import train_stage

    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(
            args.config,
            [
                f"run_dir={tmp}/run",
                f"train.updates={args.updates}",
                f"train.checkpoint_every={args.updates}",
                *SHORT,
                *args.overrides,
            ],
        )
        components = build_components(cfg)
        rows.append(census("built", components, None, args.release))
        accumulate, step, update = rl._accumulate_gradients, rl._optimizer_step, rl.policy_update
        current = {}

        def censused_update(components, optimizer, *a, **k):
            current["optimizer"] = optimizer
            rows.append(census("update start", components, optimizer, args.release))
            return update(components, optimizer, *a, **k)

        def censused_accumulate(*a, **k):
            out = accumulate(*a, **k)
            rows.append(census("after backward", components, current["optimizer"], args.release))
            return out

        def censused_step(*a, **k):
            out = step(*a, **k)
            rows.append(census("after optimizer step", components, current["optimizer"], args.release))
            return out

        sft_step = analyzer_sft.guarded_step

        def censused_sft_step(optimizer, *a, **k):
            rows.append(census("sft before step", components, optimizer, args.release))
            return sft_step(optimizer, *a, **k)

        analyzer_sft.guarded_step = censused_sft_step
        rl.policy_update = censused_update
        rl._accumulate_gradients = censused_accumulate
        rl._optimizer_step = censused_step
        train_stage(components)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "rows": rows,
                "short": SHORT,
                "overrides": args.overrides,
                "release": args.release,
                "peak_rss_by_phase_mb": phase_peaks_mb,
                "seconds_by_phase": phase_seconds,
                "provenance": provenance(),
            },
            indent=2,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
