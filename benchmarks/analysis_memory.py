"""Peak memory and time of the analyzer's greedy decoding against its generation batch size (issue 17).

The analysis prompts are long (the whole episode, ~800 tokens each on the default), and one generation batch
holds every row's K/V for prompt + new tokens at once. Each batch size runs in a fresh process on the same prompts
(the label prompts of a finished run), from the configured model, so `ru_maxrss` is that decoding's own peak.

    cd benchmarks && python analysis_memory.py --labels ../runs/default/labels.jsonl --batches 64 16
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from provenance import ROOT, provenance  # benchmarks/provenance.py (scripts run from this folder)

CHILD = """
import json, resource, sys, time
from seed.config import load_config
from seed.models.backend import Sampling
from seed.agent import prompt_ids
from seed.train.components import build_components

labels, batch, new_tokens, config = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
comps = build_components(load_config(config, ["run_dir=/tmp/seed-analysis-memory"]), with_reference=False)
prompts = [prompt_ids(comps.tokenizer, json.loads(line)["prompt"]) for line in open(labels)]
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
comps.rollout_backend().generate(prompts, Sampling(greedy=True, max_new_tokens=new_tokens, stop=()), batch_size=batch)
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"batch_size": batch, "prompts": len(prompts), "prompt_tokens": sum(map(len, prompts)),
                  "new_tokens": new_tokens, "peak_rss_loaded_mb": loaded, "peak_rss_mb": peak,
                  "peak_above_loaded_mb": peak - loaded, "seconds": seconds}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", default=str(ROOT / "runs/default/labels.jsonl"), help="a run's labels.jsonl")
    ap.add_argument("--batches", type=int, nargs="+", default=[64, 16])
    ap.add_argument("--new-tokens", type=int, default=160, help="distill.analyzer_max_new_tokens of the default")
    ap.add_argument("--config", default="default")
    ap.add_argument("--out", default="results/analysis_memory.json")
    args = ap.parse_args()
    if not Path(args.labels).is_file():
        sys.exit(f"{args.labels}: no such file; run `seed run` (or `seed start`) first, or pass --labels")
    rows = []
    for batch in args.batches:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, args.labels, str(batch), str(args.new_tokens), args.config],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        r = rows[-1]
        print(
            f"batch {batch:>3}: peak RSS {r['peak_rss_mb']:.0f} MB ({r['peak_above_loaded_mb']:+.0f} MB above the "
            f"loaded model), {r['seconds']:.1f} s for {r['prompts']} prompts ({r['prompt_tokens']} tokens)"
        )
    path = Path(__file__).parent / args.out
    path.write_text(json.dumps({**provenance(), "rows": rows}, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
