"""The two parsers of model output (analysis JSON, `<think>`/`<action>` tags) on the fuzz inputs of
tests/test_parsers_fuzz.py: how many raise, and how long the slowest take, by input length.

    cd benchmarks && python parsers.py                    # this checkout
    cd benchmarks && python parsers.py --src /other/src   # another tree (e.g. an older commit's worktree)

Each parser runs in a worker process; an input it has not finished after --limit seconds (60) is counted as a
timeout and the worker replaced. Prints a table, writes results/parsers[_<label>].json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from collections import defaultdict

from provenance import ROOT, provenance  # benchmarks/provenance.py (scripts run from this folder)


def _worker(src: str, jobs, results) -> None:
    sys.path.insert(0, src)
    from seed.agent import parse_action
    from seed.skills import parse_analysis

    parsers = {"analysis": lambda t: parse_analysis(t), "action": lambda t: parse_action(t, ["up", "down"])}
    for i, name, text in iter(jobs.get, None):
        t0 = time.perf_counter()
        try:
            parsers[name](text)
            error = ""
        except Exception as exc:  # what the old parsers did with hostile input
            error = type(exc).__name__
        results.put((i, name, time.perf_counter() - t0, error))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=str(ROOT / "src"))
    ap.add_argument("--label", default="")
    ap.add_argument("--inputs", type=int, default=10_000)
    ap.add_argument("--limit", type=float, default=60.0, help="seconds before an input counts as a timeout")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from test_parsers_fuzz import adversarial, generated

    inputs = adversarial() + generated(args.inputs - len(adversarial()))
    rows: dict[str, dict[int, list[float]]] = {"analysis": defaultdict(list), "action": defaultdict(list)}
    errors: dict[str, dict[str, int]] = {"analysis": defaultdict(int), "action": defaultdict(int)}
    timeouts = {"analysis": 0, "action": 0}
    ctx = mp.get_context("spawn")  # a fresh interpreter: it imports seed from --src, not from this process

    def start():
        jobs, results = ctx.Queue(), ctx.Queue()
        worker = ctx.Process(target=_worker, args=(args.src, jobs, results), daemon=True)
        worker.start()
        return jobs, results, worker

    for name in rows:
        jobs, results, worker = start()
        for i, text in enumerate(inputs):
            jobs.put((i, name, text))
            try:
                _, _, seconds, error = results.get(timeout=args.limit)
            except Exception:  # the worker is stuck on this input: count it, start another
                worker.kill()
                timeouts[name] += 1
                jobs, results, worker = start()
                continue
            rows[name][len(text)].append(seconds)
            if error:
                errors[name][error] += 1
        jobs.put(None)
    summary = {}
    for name, by_size in rows.items():
        summary[name] = {
            "raised": dict(errors[name]),
            "timeouts": timeouts[name],
            "by_length": {
                str(n): {
                    "inputs": len(t),
                    "median_ms": round(statistics.median(t) * 1e3, 3),
                    "slowest_ms": round(max(t) * 1e3, 3),
                }
                for n, t in sorted(by_size.items())
                if len(t) >= 5
            },
            "slowest_ms": round(max(x for t in by_size.values() for x in t) * 1e3, 3),
        }
        print(
            f"{name}: raised {dict(errors[name])}, timeouts {timeouts[name]}, slowest {summary[name]['slowest_ms']} ms"
        )
    out = ROOT / "benchmarks" / "results" / f"parsers{'_' + args.label if args.label else ''}.json"
    out.write_text(
        json.dumps({**provenance(), "src": args.src, "inputs": len(inputs), "summary": summary}, indent=2) + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
