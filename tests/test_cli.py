"""The `seed` command: listing, playing with exactly the agent's prompt, clear config errors."""

import json
import subprocess
import sys

from seed.cli import main
from seed.config import load_config
from seed.envs import make


def test_envs_lists_builtins(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert "alfworld" in out and "sokoban" in out


def test_config_error_exits_2_and_names_key(capsys, tmp_path):
    assert main(["train", "tiny", "algo.norm=median", f"run_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "algo.norm" in err and "mean_std, mean" in err
    assert not (tmp_path / "metrics.jsonl").exists()  # nothing ran


def test_play_shows_the_agent_prompt_and_solves_with_the_expert():
    env = make("sokoban", split="train")
    env.reset(0)
    plan = env.expert_plan()
    proc = subprocess.run(
        [sys.executable, "-m", "seed.cli", "play", "sokoban", "--seed", "0"],
        input="jump\n<action>up\n" + "\n".join(plan) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Your task is to: push the box onto the target" in proc.stdout
    assert "<think> </think>" in proc.stdout  # the same instruction block the agent gets
    assert "[the env did not accept 'jump'" in proc.stdout  # well-formed: sent, the env answers, no penalty
    assert "[invalid: no <action>...</action> pair] the step is penalised and a no-op" in proc.stdout
    assert "*** task solved ***" in proc.stdout


def test_play_rgb_saves_each_frame_and_draws_it_on_a_terminal():
    from PIL import Image

    from seed.cli import terminal_image

    env = make("sokoban", split="train")
    env.reset(1)
    plan = env.expert_plan()
    proc = subprocess.run(
        [sys.executable, "-m", "seed.cli", "play", "sokoban", "--seed", "1", "--render", "rgb"],
        input="\n".join(plan) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    frames = [line[len("[frame: ") : -1] for line in proc.stdout.splitlines() if line.startswith("[frame: ")]
    assert len(frames) == len(plan) and "*** task solved ***" in proc.stdout
    assert Image.open(frames[0]).size == (96, 96) and "The grid is shown in the image" in proc.stdout
    art = terminal_image(Image.new("RGB", (8, 8), (10, 20, 30)), width=4)
    assert art.count("\n") == 1 and "\x1b[38;2;10;20;30m" in art  # two rows of four half-block cells


def test_eval_command_writes_table(tmp_path, capsys):
    assert main(["eval", "tiny", f"run_dir={tmp_path}", "eval.episodes=2", "eval.splits=[valid_seen]"]) == 0
    result = json.loads((tmp_path / "eval_update_00000.json").read_text())
    assert result["valid_seen"]["overall"]["n"] == 2
    assert (tmp_path / "eval" / "update_00000" / "valid_seen.jsonl").exists()
    assert "valid_seen" in capsys.readouterr().out


def test_play_with_a_config_uses_its_rooms_and_history():
    cfg = load_config("default")
    env = make("sokoban", split="train", **cfg.env.kwargs)
    env.reset(0)
    plan = env.expert_plan()
    proc = subprocess.run(
        [sys.executable, "-m", "seed.cli", "play", "sokoban", "--seed", "0", "--config", "default"],
        input="jump\n" + "\n".join(plan) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "*** task solved ***" in proc.stdout
    assert "Prior to this step" not in proc.stdout  # the default config shows no history
