"""Hostile but fair probes of the `seed` command: bad configs, poisoned and damaged run state, hostile model and
teacher output, misbehaving envs. Each probe runs in its own subprocess, so any version of seed can be probed:

    cd benchmarks && python probes.py                     # this checkout
    cd benchmarks && python probes.py --src /other/src    # another tree, e.g. a worktree of an older commit

Every probe gets one outcome:
  clean      stopped before doing harm, with one message that says what to do (no traceback)
  recovered  went on correctly and said so (a fault kept to one episode, a damaged file set aside)
  traceback  a Python traceback instead of a message
  hang       still running at the probe's time limit
  accepted   bad input taken silently (rc 0, no message)
  harm       code from a file ran, a key was written to disk, NaN weights were saved, or data was lost

The config probes are tests/test_config_errors.py's table. Prints a table, writes results/probes[_<label>].json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path

from provenance import ROOT, provenance  # benchmarks/provenance.py (scripts run from this folder)

sys.path.insert(0, str(ROOT / "tests"))
from hostile import plant  # noqa: E402
from test_config_errors import CASES, materialise  # noqa: E402
from test_openai_teacher import _Misbehaving  # noqa: E402

BENCH = Path(__file__).resolve().parent
TINY = ["tiny", "train.keep_checkpoints=5", "eval.episodes=2"]


@dataclass
class Result:
    rc: int | None
    out: str
    err: str
    seconds: float

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.err

    def message(self) -> str:
        lines = [
            x[x.index("seed:") :] for x in (self.out + "\n" + self.err).splitlines() if "seed:" in x
        ]  # a progress bar may precede it on its line
        return lines[-1][:160] if lines else self.err.strip().splitlines()[-1][:160] if self.err.strip() else ""


class Probe:
    def __init__(self, src: Path, tmp: Path):
        self.src, self.tmp = src, tmp

    def seed(self, *argv: str, timeout: float = 180, faulty_env: bool = False, cwd: Path | None = None) -> Result:
        """`seed ARGV` of the probed tree in a fresh process (with the faulty Sokoban registered if asked)."""
        code = (
            "import sys; "
            + ("import probe_envs; " if faulty_env else "")
            + "from seed.cli import main; sys.exit(main(sys.argv[1:]))"
        )
        return self.python(code, *argv, timeout=timeout, cwd=cwd)

    def python(self, code: str, *argv: str, timeout: float = 180, cwd: Path | None = None) -> Result:
        path = os.pathsep.join(map(str, (self.src, BENCH, ROOT / "tests")))
        env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "SEED_LOG": "ERROR"}
        t0 = time.perf_counter()
        try:
            p = subprocess.run(
                [sys.executable, "-c", code, *argv],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=cwd or self.tmp,
                errors="replace",
            )
            return Result(p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)
        except subprocess.TimeoutExpired as exc:
            return Result(None, str(exc.stdout or ""), str(exc.stderr or ""), time.perf_counter() - t0)

    def finished_run(self) -> Path:
        """A copy of one tiny run of 2 updates (checkpoints 0, 1, 2 kept), made once per tree."""
        base = self.tmp / "finished"
        if not base.exists():
            r = self.seed("train", *TINY, f"run_dir={base}", "train.updates=2")
            assert r.rc == 0, r.err[-2000:]
        copy = Path(tempfile.mkdtemp(dir=self.tmp)) / "run"
        shutil.copytree(base, copy)
        return copy


def outcome(r: Result, stopped_ok: bool = False, went_on_ok: bool = False) -> str:
    """The common cases: `stopped_ok` says the right thing is to stop with a message; `went_on_ok` that the run
    was right to go on (the caller checked what it did)."""
    if r.rc is None:
        return "hang"
    if r.traceback:
        return "traceback"
    if r.rc != 0:
        return "clean" if stopped_ok and r.message().startswith("seed:") else "traceback"
    return "recovered" if went_on_ok else "accepted"


def config_probes(p: Probe) -> list[dict]:
    rows = []
    for name, files, args, _ in CASES:
        case = Path(tempfile.mkdtemp(dir=p.tmp))
        argv = materialise(case, files, args)
        before = {x for x in case.rglob("*")}
        r = p.seed("train", *argv, timeout=240)
        wrote = sorted(str(x.relative_to(case)) for x in set(case.rglob("*")) - before)
        verdict = outcome(r, stopped_ok=True)
        rows.append(
            {
                "probe": f"config: {name}",
                "outcome": verdict,
                "rc": r.rc,
                "wrote_files": bool(wrote),
                "message": r.message(),
                "seconds": round(r.seconds, 1),
            }
        )
    return rows


def _nan_checkpoints(p: Probe, run: Path) -> int:
    code = (
        "import sys, torch, pathlib; print(sum(any(v.is_floating_point() and not torch.isfinite(v).all() "
        "for v in torch.load(c, weights_only=False)['model'].values()) "
        "for c in pathlib.Path(sys.argv[1]).glob('checkpoints/update_*.pt')))"
    )
    r = p.python(code, str(run))
    return int(r.out.strip() or 0)


def probe_huge_lr(p: Probe) -> tuple[str, str]:
    run = p.tmp / "huge_lr"
    r = p.seed("train", *TINY, f"run_dir={run}", "algo.lr=1e30", "train.updates=4", "warmup.enabled=false")
    nan = _nan_checkpoints(p, run)
    return ("harm" if nan else outcome(r, stopped_ok=True)), f"rc {r.rc}, {nan} checkpoints with NaN; {r.message()}"


def probe_planted_checkpoint(p: Probe, export: bool) -> tuple[str, str]:
    run = p.finished_run()
    marker, planted = run.parent / "payload_ran", run / "checkpoints" / "update_00009.pt"
    plant(planted, marker)
    if export:
        r = p.seed("export", str(run), str(run.parent / "hf"), "--checkpoint", str(planted))
    else:
        r = p.seed("train", *TINY, f"run_dir={run}", "train.updates=3")
    if marker.exists():
        return "harm", "the pickle's payload ran"
    return outcome(r, stopped_ok=export, went_on_ok=not export), f"rc {r.rc}; {r.message()}"


def probe_api_key(p: Probe) -> tuple[str, str]:
    run, key = p.tmp / "key_run", "sk-probe-0123456789abcdef"
    r = p.seed(
        "train", *TINY, f"run_dir={run}", f"label.openai.api_key={key}", "train.updates=1", "warmup.enabled=false"
    )
    leaked = [str(x.relative_to(run)) for x in run.rglob("*") if x.is_file() and key.encode() in x.read_bytes()]
    return ("harm" if leaked else outcome(r, went_on_ok=True)), f"key found in {leaked[:4]}" if leaked else "not found"


def probe_parser(p: Probe, name: str) -> tuple[str, str]:
    texts = {
        "deep": "'{\"episode_skill\": ' + '[' * 995 + ']' * 995 + '}'",
        "digits": "'{\"episode_skill\": \"Push the box up now.\", \"n\": ' + '7' * 5000 + '}'",
        "tags": "'<action>' * 20000",
    }
    code = (
        "import time; from seed.skills import parse_analysis; from seed.agent import parse_action; "
        f"t = {texts[name]}; t0 = time.perf_counter(); a = parse_analysis(t); parse_action(t, ['up']); "
        "print(f'{time.perf_counter() - t0:.3f}')"
    )
    r = p.python(code)
    if r.traceback:
        return "traceback", r.err.strip().splitlines()[-1][:120]
    seconds = float(r.out.strip())
    return ("hang" if seconds > 1 else "recovered"), f"{seconds * 1000:.1f} ms"


def probe_teacher(p: Probe, behaviour: str) -> tuple[str, str]:
    """`seed label` against a chat-completions server that always behaves like this."""
    _Misbehaving.calls, _Misbehaving.script = 0, [behaviour]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Misbehaving)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        r = p.seed(
            "label",
            *TINY,
            f"run_dir={p.tmp / ('label_' + behaviour)}",
            "label.teacher=openai",
            f"label.openai.base_url=http://127.0.0.1:{httpd.server_address[1]}/v1",
            "label.openai.model=m",
            "label.tasks=4",
            "label.group_size=2",
            "label.openai.retries=2",
            "label.openai.backoff=0.01",
            "label.openai.timeout=2",
            "label.openai.deadline=4",
            "warmup.enabled=false",
            timeout=120,
        )
    finally:
        httpd.shutdown()
    return outcome(r, stopped_ok=True), f"rc {r.rc}, {_Misbehaving.calls} requests, {r.seconds:.0f} s; {r.message()}"


def probe_damaged(p: Probe, damage: str) -> tuple[str, str]:
    run = p.finished_run()
    newest = run / "checkpoints" / "update_00002.pt"
    if damage == "torn metrics line":
        with (run / "metrics.jsonl").open("a") as f:
            f.write('{"update": 3, "rollout/succ')
    elif damage == "non-UTF-8 metrics byte":
        with (run / "metrics.jsonl").open("ab") as f:
            f.write(b'{"update": 2, "x": "\xff"}\n')
    elif damage == "truncated newest checkpoint":
        newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    elif damage == "empty newest checkpoint":
        newest.write_bytes(b"")
    elif damage == "deleted reference.pt":
        (run / "reference.pt").unlink()
    elif damage == "stale temp file":
        (run / "checkpoints" / ".update_00003.pt.4242.tmp").write_bytes(b"half")
    r = p.seed("train", *TINY, f"run_dir={run}", "train.updates=3")
    updates = [row.get("update") for row in _rows(run / "metrics.jsonl") if "time/rollout" in row]
    if damage == "deleted reference.pt":
        said = "reference" in (r.out + r.err)
        return (
            outcome(r, went_on_ok=said) if r.rc == 0 else outcome(r, stopped_ok=True)
        ), f"rc {r.rc}; {'said so' if said else 'silently used the model as loaded as the KL reference'}"
    if damage == "stale temp file":
        left = (run / "checkpoints" / ".update_00003.pt.4242.tmp").exists()
        return ("accepted" if left else "recovered"), "temp file left behind" if left else "removed"
    ok = updates == [1, 2, 3]
    return (
        outcome(r, went_on_ok=ok) if r.rc == 0 and ok else outcome(r, stopped_ok=True)
    ), f"rc {r.rc}, updates logged {updates}; {r.message()}"


def _rows(path: Path) -> list[dict]:
    rows = []
    if not path.exists():
        return rows
    for line in path.read_bytes().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return rows


def probe_changed_config(p: Probe) -> tuple[str, str]:
    run = p.finished_run()
    r = p.seed("train", *TINY, f"run_dir={run}", "train.updates=3", "algo.lr=5e-3")
    return outcome(r, stopped_ok=True), f"rc {r.rc}; {r.message()}"


def probe_start_stage_repeat(p: Probe) -> tuple[str, str]:
    """Killed after the start point (checkpoint 0) was written, before the warm-up's marker."""
    run = p.finished_run()
    for name in ("update_00001.pt", "update_00002.pt"):
        (run / "checkpoints" / name).unlink()
    (run / "stage_warmup.json").unlink()
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _rows(run / "metrics.jsonl") if r.get("update") == 0)
    )
    r = p.seed("train", *TINY, f"run_dir={run}", "train.updates=1")
    zero_rows = sum(row.get("update") == 0 for row in _rows(run / "metrics.jsonl"))
    return (
        "harm" if zero_rows > 1 else outcome(r, went_on_ok=True)
    ), f"{zero_rows} update-0 rows ({'the warm-up ran again on warmed weights' if zero_rows > 1 else 'not repeated'})"


def probe_env(p: Probe, mode: str, *extra: str) -> tuple[str, str]:
    run = p.tmp / f"env_{mode}"
    r = p.seed(
        "train",
        *TINY,
        f"run_dir={run}",
        f"env.kwargs={{mode: {mode}}}",
        "train.updates=1",
        *extra,
        faulty_env=True,
        timeout=90,
    )
    dropped = [row.get("rollout/dropped_episodes") for row in _rows(run / "metrics.jsonl") if "time/rollout" in row]
    if mode == "odd_reset_raises":  # half the tasks break: the run should go on without them
        return outcome(r, went_on_ok=bool(dropped)), f"rc {r.rc}, dropped episodes {dropped}; {r.message()}"
    return outcome(r, stopped_ok=True), f"rc {r.rc}, {r.seconds:.0f} s; {r.message()}"


def probe_oracle_fault(p: Probe) -> tuple[str, str]:
    run = p.tmp / "oracle_fault"
    r = p.seed(
        "label",
        *TINY,
        f"run_dir={run}",
        "env.kwargs={mode: expert_raises}",
        "label.tasks=2",
        "label.group_size=2",
        "warmup.enabled=false",
        faulty_env=True,
    )
    return outcome(r, stopped_ok=True), f"rc {r.rc}; {r.message()}"


def run_probes(p: Probe) -> list[dict]:
    probes = [
        ("lr = 1e30 (NaN gradient norms)", lambda: probe_huge_lr(p)),
        ("planted pickle in run_dir, seed train", lambda: probe_planted_checkpoint(p, export=False)),
        ("planted pickle, seed export --checkpoint", lambda: probe_planted_checkpoint(p, export=True)),
        ("label.openai.api_key in the config", lambda: probe_api_key(p)),
    ]
    probes += [(f"analyzer output: {n}", lambda n=n: probe_parser(p, n)) for n in ("deep", "digits", "tags")]
    probes += [
        (f"teacher server: {b}", lambda b=b: probe_teacher(p, b))
        for b in ("closed", "cut", "no_choices", "null_content", "list_body", "500", "400", "slow")
    ]
    probes += [
        (f"damaged: {d}", lambda d=d: probe_damaged(p, d))
        for d in (
            "torn metrics line",
            "non-UTF-8 metrics byte",
            "truncated newest checkpoint",
            "empty newest checkpoint",
            "deleted reference.pt",
            "stale temp file",
        )
    ]
    probes += [
        ("changed config on an existing run_dir", lambda: probe_changed_config(p)),
        ("killed between start point and marker", lambda: probe_start_stage_repeat(p)),
        ("env: step() returns None", lambda: probe_env(p, "step_none", "warmup.enabled=false")),
        ("env: reset raises for half the tasks (warm-up too)", lambda: probe_env(p, "odd_reset_raises")),
        ("env: every episode faults", lambda: probe_env(p, "reset_raises", "warmup.enabled=false")),
        (
            "env: step hangs, env.workers 0",
            lambda: probe_env(p, "step_hangs", "warmup.enabled=false", "env.step_timeout=3"),
        ),
        ("env: the oracle's replay raises", lambda: probe_oracle_fault(p)),
    ]
    rows = []
    for name, fn in probes:
        t0 = time.perf_counter()
        verdict, detail = fn()
        seconds = round(time.perf_counter() - t0, 1)
        rows.append({"probe": name, "outcome": verdict, "detail": detail, "seconds": seconds})
        print(f"  {verdict:<10} {name}: {detail}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=str(ROOT / "src"), help="the src/ folder of the seed tree to probe")
    ap.add_argument("--label", default="", help="suffix of the results file (e.g. before)")
    ap.add_argument("--only", choices=("config", "run"), default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        p = Probe(Path(args.src).resolve(), Path(tmp))
        rows = [] if args.only == "run" else config_probes(p)
        print(f"config probes: {dict(Counter(r['outcome'] for r in rows))}", flush=True)
        rows += [] if args.only == "config" else run_probes(p)
    summary = {
        kind: dict(Counter(r["outcome"] for r in rows if r["probe"].startswith("config:") == (kind == "config")))
        for kind in ("config", "run")
    }
    summary["config_wrote_files"] = sum(r.get("wrote_files", False) for r in rows)
    print(json.dumps(summary, indent=2))
    out = BENCH / "results" / f"probes{'_' + args.label if args.label else ''}.json"
    out.write_text(json.dumps({**provenance(), "src": args.src, "summary": summary, "probes": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
