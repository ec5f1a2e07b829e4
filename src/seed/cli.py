"""The `seed` command. Thin: parse, load + validate the config, call a stage."""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import tempfile
import time
from pathlib import Path


def _config(args):
    """The validated config, checked against this machine and against the run directory it would continue."""
    from seed.config import check_resume, check_runtime, load_config

    path = args.config
    overrides = list(args.overrides)
    if path is not None and "=" in path and not Path(path).exists():  # `seed train key=value` without a file
        overrides.insert(0, path)
        path = None
    cfg = load_config(path if path is not None else "default", overrides)
    check_runtime(cfg)
    check_resume(cfg, Path(cfg.run_dir), force=getattr(args, "force", False))
    return cfg


def _components(cfg, with_reference=True):
    """Model, tokenizer and reference, loaded before anything is written to the run directory."""
    from seed.errors import RunError
    from seed.train.components import build_components

    try:
        return build_components(cfg, with_reference=with_reference)
    except (OSError, ValueError) as exc:
        raise RunError(f"model {cfg.model.name!r} could not be loaded: {' '.join(str(exc).split())[:400]}") from exc


def _prepared(cfg, args, with_reference=True):
    """Components first (a bad model fails before any file exists), then the run directory."""
    from seed.train.pipeline import prepare_run_dir

    comps = _components(cfg, with_reference)
    prepare_run_dir(cfg, force=args.force)
    return comps


def cmd_train(args) -> None:
    from seed.train.pipeline import rl_stage, start_stages

    comps = _prepared(_config(args), args)
    start_stages(comps)
    rl_stage(comps)


def cmd_eval(args) -> None:
    from seed.train.pipeline import eval_stage, load_latest_weights

    cfg = _config(args)
    comps = _prepared(cfg, args, with_reference=False)
    update = load_latest_weights(comps)
    eval_stage(comps, f"update_{update:05d}")


def cmd_run(args) -> None:
    from seed.train.metrics import phase_peaks_mb, phase_seconds, process_peak_rss_mb
    from seed.train.pipeline import eval_stage, rl_stage, start_stages
    from seed.train.wandb_sink import open_sink

    t0 = time.time()
    phase_peaks_mb.clear()  # this run's phases only
    phase_seconds.clear()
    cfg = _config(args)
    comps = _prepared(cfg, args)
    run_dir = Path(cfg.run_dir)
    start_stages(comps)
    initial = eval_stage(comps, "initial")
    rl_stage(comps)
    final = eval_stage(comps, "final")
    summary = {
        "wall_seconds": time.time() - t0,
        "peak_rss_mb": max(process_peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "peak_rss_by_phase_mb": {name: round(mb) for name, mb in phase_peaks_mb.items()},
        "seconds_by_phase": {name: round(s, 1) for name, s in phase_seconds.items()},
        "initial": {s: r["overall"] for s, r in initial.items()},
        "final": {s: r["overall"] for s, r in final.items()},
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    sink = open_sink(cfg)
    if sink is not None:
        sink.log_summary({"wall_seconds": summary["wall_seconds"], "peak_rss_mb": summary["peak_rss_mb"]})
    print(
        f"\nrun directory: {run_dir}\nwall time {summary['wall_seconds']:.0f}s, peak RSS "
        f"{summary['peak_rss_mb']:.0f} MB"
    )
    if summary["peak_rss_by_phase_mb"]:
        print("peak RSS by phase: " + ", ".join(f"{k} {v} MB" for k, v in summary["peak_rss_by_phase_mb"].items()))
    for split in final:
        i, f = initial[split]["overall"], final[split]["overall"]
        print(f"{split:<14} success {i['success']:.3f} ± {i['se']:.3f}  ->  {f['success']:.3f} ± {f['se']:.3f}")


def cmd_start(args) -> None:
    """The start stages alone (format warm-up, label + analyzer SFT, as configured): the start point, checkpoint 0,
    ready for `seed probe RUN_DIR` before any RL compute is spent."""
    from seed.train.pipeline import start_stages

    cfg = _config(args)
    start_stages(_prepared(cfg, args, with_reference=False))
    print(f"start point: {Path(cfg.run_dir) / 'checkpoints'} (update 0); probe it with `seed probe {cfg.run_dir}`")


def cmd_label(args) -> None:
    from seed.train.analyzer_sft import label_stage
    from seed.train.pipeline import progress_bar

    cfg = _config(args)
    comps = _prepared(cfg, args, with_reference=False)
    bar = progress_bar(total=cfg.label.tasks, desc="label (tasks)")
    out = label_stage(comps, progress=bar.update)
    bar.close()
    print(f"labels: {out}")


def cmd_sft(args) -> None:
    from seed.train.pipeline import sft_stage_once

    args.overrides = list(args.overrides) + ["sft.enabled=true"]
    cfg = _config(args)
    comps = _prepared(cfg, args)
    sft_stage_once(comps)
    print((Path(cfg.run_dir) / "stage_sft.json").read_text())


def cmd_report(args) -> None:
    from seed.config import load_config
    from seed.models import load_tokenizer
    from seed.report import top_delta_tokens, update_table

    run_dir = Path(args.run_dir)
    cfg = load_config(run_dir / "config.yaml")
    if args.html is not None:
        from seed.report.page import write_report

        out = write_report(run_dir, load_tokenizer(cfg.model.name), Path(args.html) if args.html else None)
        print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MB): open it in a browser")
        return
    print(update_table(run_dir))
    episode, tokens = top_delta_tokens(run_dir, load_tokenizer(cfg.model.name))
    if episode is not None:
        print(f"\nepisode {episode['episode_id']} ({'success' if episode['won'] else 'failure'}): {episode['task']}")
        print(f"skill: {episode['skill']}")
        print("largest Δ tokens (Δ, token, step):")
        for delta, tok, step in tokens:
            print(f"  {delta:+.3f}  {tok!r:<20} step {step}")


def cmd_export(args) -> None:
    """A run's checkpoint (single-process or sharded) as a plain Hugging Face folder, LoRA merged."""
    from seed.config import load_config
    from seed.dist.fsdp import export_hf
    from seed.errors import RunError
    from seed.models import load_model, load_tokenizer
    from seed.train.checkpoint import load_checkpoint, load_latest_checkpoint

    run_dir = Path(args.run_dir)
    cfg = load_config(run_dir / "config.yaml")
    if args.checkpoint:
        ckpt = Path(args.checkpoint)
        state = load_checkpoint(ckpt)  # verified: a planted or damaged file is refused before anything runs
    else:
        ckpt, state = load_latest_checkpoint(run_dir)
    if state is None:
        raise RunError(f"no checkpoint under {run_dir / 'checkpoints'}")
    tok = load_tokenizer(cfg.model.name)
    model = load_model(cfg.model.name, tok, lora=cfg.model.lora, seed=cfg.seed)
    out = export_hf(model, tok, state["model"], Path(args.out_dir))
    print(f"exported {ckpt} -> {out}")


def cmd_probe(args) -> None:
    """`seed probe`: the teacher contexts' shift on the expert's and the sampled action, on a fixed panel."""
    from seed.config import load_config
    from seed.errors import RunError
    from seed.train.checkpoint import load_checkpoint, load_latest_checkpoint
    from seed.train.probe import CONTEXTS, format_probe, run_probe

    unknown = [c for c in args.contexts if c not in CONTEXTS]
    if unknown:
        raise RunError(f"unknown context(s) {', '.join(unknown)}; allowed: {', '.join(CONTEXTS)}")
    target = Path(args.target)
    run_dir = target if target.is_dir() and (target / "config.yaml").exists() else None
    cfg = load_config(run_dir / "config.yaml" if run_dir else args.target, list(args.overrides))
    comps = _components(cfg, with_reference=False)
    where = "the model as configured"
    if args.checkpoint:
        ckpt = Path(args.checkpoint)
        if not ckpt.exists() and args.checkpoint.isdigit() and run_dir:
            ckpt = run_dir / "checkpoints" / f"update_{int(args.checkpoint):05d}.pt"
        state = load_checkpoint(ckpt)  # verified: a planted or damaged file is refused before anything runs
    elif run_dir:
        ckpt, state = load_latest_checkpoint(run_dir, set_aside=False)
        if state is None:
            raise RunError(f"no checkpoint under {run_dir / 'checkpoints'}")
    else:
        ckpt, state = None, None
    if state is not None:
        comps.policy.model.load_state_dict(state["model"])
        where = str(ckpt)
    del state  # copied into the model: the probe must not run beside a second copy of the weights
    result = run_probe(
        comps,
        split=args.split,
        n_states=args.states,
        names=tuple(args.contexts),
        group_size=args.group_size,
        seed=args.seed,
    )
    result["weights"] = where
    print(f"seed probe: {where}\n{format_probe(result)}")
    if args.json:
        from seed.storage import atomic_write_text

        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(args.json), json.dumps(result, indent=2))


def cmd_envs(args) -> None:
    from seed.envs import available

    for name, desc in available().items():
        print(f"{name:<12}{desc}")


def _show_frames(images: list, folder: Path, step: int) -> None:
    """Each frame saved as a PNG (its path printed) and, on a terminal, drawn in coloured half-blocks."""
    for i, image in enumerate(images):
        path = folder / f"step{step:03d}_{i}.png"
        image.save(path)
        print(f"[frame: {path}]")
        if sys.stdout.isatty():
            print(terminal_image(image))


def terminal_image(image, width: int = 48) -> str:
    """An RGB image as 24-bit-colour text: each character cell shows two pixel rows (upper half block)."""
    height = max(2, round(image.height * width / image.width / 2) * 2)
    pixels = image.convert("RGB").resize((width, height))
    lines = []
    for y in range(0, height, 2):
        cells = []
        for x in range(width):
            (r1, g1, b1), (r2, g2, b2) = pixels.getpixel((x, y)), pixels.getpixel((x, y + 1))
            cells.append(f"\x1b[38;2;{r1};{g1};{b1}m\x1b[48;2;{r2};{g2};{b2}m\u2580")
        lines.append("".join(cells) + "\x1b[0m")
    return "\n".join(lines)


def _answer_block(action: str, tags: tuple[str, ...]) -> str:
    from seed.agent.parse import format_action

    try:
        return format_action(action, tags)
    except ValueError:  # not `tag[text]`: sent in the env's first tag
        return f"<{tags[0]}>{action}</{tags[0]}>"


def cmd_play(args) -> None:
    """A person plays the env and sees exactly the prompt the agent would see."""
    from seed.agent import parse_action, render_text
    from seed.config import ConfigError
    from seed.envs import available, make
    from seed.envs.base import action_tags
    from seed.types import StepState

    if args.env not in available():
        raise ConfigError(f"unknown env {args.env!r}; available: {', '.join(available())}")
    kwargs, k, max_steps, validity = {}, args.history, args.max_steps, "format"
    if args.config:  # play the env exactly as that config sets it up (room generator, history, step limit)
        from seed.config import load_config

        cfg = load_config(args.config)
        if cfg.env.name != args.env:
            raise ConfigError(f"config {args.config!r} sets env.name={cfg.env.name!r}, not {args.env!r}")
        kwargs, k, max_steps = cfg.env.kwargs, cfg.env.history_length, cfg.env.max_steps
        validity = cfg.rollout.validity
    if args.render:
        kwargs = {**kwargs, "render": args.render}
    env = make(args.env, split=args.split, **kwargs)
    obs = env.reset(args.seed)
    history: list[tuple[str, str]] = []
    frames_dir = None
    for step in range(max_steps):
        state = StepState.after(args.env, obs, history, k, step)
        print("=" * 80 + "\n" + render_text(state) + "\n" + "=" * 80)
        if state.images:
            frames_dir = frames_dir or Path(tempfile.mkdtemp(prefix="seed-play-"))
            _show_frames(state.images, frames_dir, step)
        try:
            line = input("your response (an action, or a full <think>..</think><action>..</action>; 'quit'): ")
        except EOFError:
            break
        if line.strip() == "quit":
            break
        tags = action_tags(args.env)
        response = line if "<" in line else f"<think>playing</think>{_answer_block(line.strip(), tags)}"
        parsed = parse_action(response, state.admissible, validity, tags)
        sent = parsed.action if validity == "format" or parsed.valid else ""
        new_obs, reward, done, info = env.step(sent)
        if not parsed.valid:
            print(f"[invalid: {parsed.reason}] the step is penalised" + ("" if sent else " and a no-op"))
        elif info.get("valid") is False:
            print(f"[the env did not accept {sent!r}: a no-op, not penalised under rollout.validity = format]")
        history.append((obs.text, parsed.action))
        obs = new_obs
        if done or obs.won:
            print("*** task solved ***" if obs.won else "episode over")
            break
    env.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="seed", description="SEED and outcome-RL baselines for LLM agents")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn, helptext in (
        ("train", cmd_train, "RL training (resumes in run_dir)"),
        ("eval", cmd_eval, "evaluate the run's latest checkpoint on the fixed panels"),
        ("label", cmd_label, "roll out the base policy; a teacher labels every episode"),
        ("sft", cmd_sft, "label (if needed) + analyzer warm-up SFT"),
        ("start", cmd_start, "the start stages only: format warm-up, label + analyzer SFT"),
        ("run", cmd_run, "the whole pipeline: [label, sft,] warm-up, eval, train, eval"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("config", nargs="?", default=None, help="YAML file or shipped config name (default: default)")
        p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.updates=10 run_dir=runs/x")
        p.add_argument(
            "--force",
            action="store_true",
            help="continue a run directory under a changed config (the old one is kept as config.N.yaml)",
        )
        p.set_defaults(fn=fn)
    p = sub.add_parser("report", help="per-update table and the tokens the skills shifted most; --html: a page")
    p.add_argument("run_dir")
    p.add_argument(
        "--html",
        nargs="?",
        const="",
        default=None,
        metavar="OUT",
        help="write one self-contained HTML report (default OUT: RUN_DIR/report.html)",
    )
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("export", help="a checkpoint as a plain Hugging Face folder (LoRA merged)")
    p.add_argument("run_dir")
    p.add_argument("out_dir")
    p.add_argument("--checkpoint", default=None, help="a checkpoint file or .dcp folder (default: the latest)")
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("probe", help="is the teacher context informative? its shift on expert vs sampled actions")
    p.add_argument("target", help="a run directory (its newest checkpoint) or a config (the model as configured)")
    p.add_argument("overrides", nargs="*", help="key=value overrides of the config")
    p.add_argument("--checkpoint", default=None, help="a checkpoint file or .dcp folder, or a run's update number")
    p.add_argument("--contexts", nargs="+", default=["policy", "oracle", "sibling", "privileged", "shuffled", "empty"])
    p.add_argument("--states", type=int, default=64, help="panel size (half expert play, half policy rollouts)")
    p.add_argument("--split", default="valid_seen")
    p.add_argument("--group-size", type=int, default=4, help="policy rollouts per task (the sibling's group)")
    p.add_argument("--seed", type=int, default=0, help="which states the panel draws")
    p.add_argument("--json", default=None, help="write the result here")
    p.set_defaults(fn=cmd_probe)
    p = sub.add_parser("envs", help="list environments")
    p.set_defaults(fn=cmd_envs)
    p = sub.add_parser("play", help="play an environment in the terminal")
    p.add_argument("env")
    p.add_argument("--split", default="train")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=30)
    p.add_argument("--history", type=int, default=5)
    p.add_argument("--config", default=None, help="take env kwargs, history and max steps from this config")
    p.add_argument(
        "--render", choices=["text", "rgb", "both"], default=None, help="observations as text, frames or both"
    )
    p.set_defaults(fn=cmd_play)
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("SEED_LOG", "WARNING"), format="%(levelname)s %(name)s: %(message)s")
    from seed.config import ConfigError
    from seed.errors import SeedError

    try:
        args.fn(args)
    except ConfigError as exc:
        print(f"seed: config error: {exc}", file=sys.stderr)
        return 2
    except SeedError as exc:
        print(f"\nseed: error: {exc}", file=sys.stderr)  # on its own line, after any progress bar
        return 1
    finally:
        from seed.train.wandb_sink import finish

        finish()  # a command that logged to W&B finishes its run
    return 0


def entry() -> None:
    """The `seed` console command: `main` under tcmalloc where it is installed (see seed.allocator)."""
    from seed.allocator import reexec_under_tcmalloc

    reexec_under_tcmalloc([sys.executable, "-m", "seed.cli", *sys.argv[1:]])
    sys.exit(main())


if __name__ == "__main__":
    entry()
