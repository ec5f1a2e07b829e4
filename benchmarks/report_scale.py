"""The HTML report at the size of a long run: write time, file size and load time in headless Chromium.

A run of `--updates` updates is assembled from a real run directory by cycling its updates (episodes, metrics and
skill rows renumbered), so every update carries real episodes of the real model. Measured: the report of the
source run and of the long run, each written once and opened `--loads` times (to `document.body.dataset.ready`),
and the time to open an episode of the last update (decompressing that update's block on first use).

    python benchmarks/report_scale.py --run runs/default --updates 150 [--screenshots docs]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from seed.config import load_config
from seed.models import load_tokenizer
from seed.report.browser import Browser
from seed.report.page import update_files, write_report
from seed.storage import read_jsonl

COPIED = ("config.yaml", "summary.json", "eval_initial.json", "eval_final.json")


def cycled_run(source: Path, updates: int, out: Path) -> Path:
    """`out` as a run of `updates` updates, update u holding the source's update ((u - 1) mod n) + 1."""
    out.mkdir(parents=True)
    for name in COPIED + tuple(p.name for p in source.glob("stage_*.json")):
        if (source / name).exists():
            shutil.copy(source / name, out / name)
    files = update_files(source)
    metrics = {r["update"]: r for r in read_jsonl(source / "metrics.jsonl")}
    skills = read_jsonl(source / "skills.jsonl")
    (out / "episodes").mkdir()
    metric_rows = [r for r in read_jsonl(source / "metrics.jsonl") if r["update"] == 0]
    skill_rows = []
    for u in range(1, updates + 1):
        src = (u - 1) % len(files) + 1
        episodes = read_jsonl(files[src])
        for e in episodes:
            e["episode_id"] = f"u{u - 1}-{e['episode_id'].split('-', 1)[1]}"
        (out / "episodes" / f"update_{u - 1:05d}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
        metric_rows.append({**metrics[src], "update": u})
        skill_rows += [
            {**r, "update": u, "episode_id": f"u{u - 1}-{r['episode_id'].split('-', 1)[1]}"}
            for r in skills
            if r["update"] == src
        ]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metric_rows))
    (out / "skills.jsonl").write_text("".join(json.dumps(r) + "\n" for r in skill_rows))
    return out


def measure(run_dir: Path, tokenizer, loads: int, shots: Path | None) -> dict:
    t0 = time.perf_counter()
    page = write_report(run_dir, tokenizer, run_dir / "report.html")
    write_s = time.perf_counter() - t0
    last = max(update_files(run_dir))
    with Browser(height=1600 if shots is not None else 1000) as browser:
        load_s = [browser.open(page) for _ in range(loads)]
        charts = browser.evaluate("document.querySelectorAll('.chart').length")
        if shots is not None:
            browser.screenshot(shots / "report_curves.png")
        browser.evaluate("document.querySelector('nav button[data-tab=episodes]').click()")
        t0 = time.perf_counter()
        browser.evaluate(
            "(() => { const s = document.getElementById('pick-update'); s.value = '" + str(last) + "';"
            " s.dispatchEvent(new Event('change')); })()"
        )
        browser.wait_for("!!document.querySelector('#episode-list div[data-episode]')")
        browser.evaluate("document.querySelector('#episode-list div[data-episode]').click()")
        browser.wait_for("document.querySelectorAll('#episode-view .tok').length > 0")
        episode_s = time.perf_counter() - t0
        if shots is not None:
            browser.evaluate(
                "(() => { for (const [id, v] of [['pick-outcome', 'lost'], ['pick-order', 'largest']]) {"
                " const s = document.getElementById(id); s.value = v;"
                " s.dispatchEvent(new Event('change')); } })()"
            )
            browser.wait_for("!!document.querySelector('#episode-list div[data-episode]')")
            browser.evaluate("document.querySelector('#episode-list div[data-episode]').click()")
            browser.wait_for("document.querySelectorAll('#episode-view .tok').length > 0")
            browser.evaluate("document.querySelector('.teacher-prompt').open = true")
            browser.screenshot(shots / "report_episode.png")
        errors = list(browser.errors)
    return {
        "updates": last,
        "episodes": sum(len(read_jsonl(p)) for p in update_files(run_dir).values()),
        "size_mb": page.stat().st_size / 2**20,
        "write_s": write_s,
        "load_s": load_s,
        "load_s_median": statistics.median(load_s),
        "open_last_update_episode_s": episode_s,
        "charts": charts,
        "console_errors": errors,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="runs/default")
    ap.add_argument("--updates", type=int, default=150)
    ap.add_argument("--loads", type=int, default=3)
    ap.add_argument("--screenshots", default=None, help="save the source run's curves and an episode here")
    ap.add_argument("--out", default="benchmarks/results/report_scale.json")
    args = ap.parse_args()
    source = Path(args.run)
    tokenizer = load_tokenizer(load_config(source / "config.yaml").model.name)
    shots = Path(args.screenshots) if args.screenshots else None
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            "source": measure(source, tokenizer, args.loads, shots),  # writes RUN/report.html
            "long": measure(cycled_run(source, args.updates, Path(tmp) / "long"), tokenizer, args.loads, None),
        }
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    results["machine"] = {
        "cpu": next(
            (line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")),
            platform.processor(),
        ),
        "flags": sorted({f for f in ("avx512_bf16", "amx_bf16") if f in cpu}),
    }
    for name in ("source", "long"):
        r = results[name]
        print(
            f"{name:>6}: {r['updates']} updates, {r['episodes']} episodes, {r['size_mb']:.2f} MB, written in "
            f"{r['write_s']:.1f} s, loads in {r['load_s_median']:.2f} s (median of {len(r['load_s'])}), an "
            f"episode of update {r['updates']} opens in {r['open_last_update_episode_s']:.2f} s, "
            f"{len(r['console_errors'])} console errors"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
