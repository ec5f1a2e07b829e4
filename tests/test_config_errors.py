"""Bad input to the `seed` command: every case is one clean message naming the key, before any file is written.

CASES is the probe table (also run against other trees by benchmarks/probes.py): an id, the files to create
(name -> text or bytes), the command's arguments after `seed train` ({tmp} is the case's folder), and a
fragment the message must contain.
"""

import pytest
import torch

from seed.cli import main
from seed.config import load_config

_RUN = "run_dir={tmp}/run"
CASES = [
    # YAML and files
    ("yaml syntax in a file", {"bad.yaml": "env: {max_steps: 3\n"}, ["{tmp}/bad.yaml", _RUN], "not valid YAML"),
    ("yaml syntax in an override", {}, ["tiny", _RUN, "env={max_steps: 3"], "override"),
    ("non-UTF-8 file", {"bin.yaml": b"seed: 1\nrun_dir: \xff\xfe\n"}, ["{tmp}/bin.yaml", _RUN], "UTF-8"),
    ("directory as config", {"folder/x.yaml": "seed: 1\n"}, ["{tmp}/folder", _RUN], "directory"),
    ("missing config file", {}, ["{tmp}/nope.yaml", _RUN], "not found"),
    ("top level not a mapping", {"list.yaml": "- a\n- b\n"}, ["{tmp}/list.yaml", _RUN], "mapping"),
    ("duplicate YAML keys", {"dup.yaml": "seed: 1\nseed: 2\n"}, ["{tmp}/dup.yaml", _RUN], "duplicate key"),
    ("unhashable YAML key", {"key.yaml": "? [a, b]\n: 1\n"}, ["{tmp}/key.yaml", _RUN], "unhashable key"),
    ("base cycle", {"loop.yaml": "base: loop.yaml\n"}, ["{tmp}/loop.yaml", _RUN], "cycle"),
    ("base file missing", {"child.yaml": "base: gone.yaml\n"}, ["{tmp}/child.yaml", _RUN], "not found"),
    ("override without =", {}, ["tiny", _RUN, "train.updates"], "key=value"),
    # keys and types
    ("unknown top-level key", {}, ["tiny", _RUN, "bogus=1"], "bogus"),
    ("unknown nested key", {}, ["tiny", _RUN, "algo.bogus=1"], "algo.bogus"),
    ("unknown key under label.openai", {}, ["tiny", _RUN, "label.openai.bogus=1"], "label.openai.bogus"),
    ("section given a scalar", {}, ["tiny", _RUN, "env=5"], "'env'"),
    ("sub-key of a scalar", {}, ["tiny", _RUN, "seed.x=1"], "'seed'"),
    ("number given text", {}, ["tiny", _RUN, "algo.lr=abc"], "algo.lr"),
    ("bool given text", {}, ["tiny", _RUN, "warmup.enabled=maybe"], "warmup.enabled"),
    ("integer given a fraction", {}, ["tiny", _RUN, "train.updates=1.5"], "train.updates"),
    ("string given a number", {}, ["tiny", _RUN, "model.name=123"], "model.name"),
    ("mapping given a number", {}, ["tiny", _RUN, "env.kwargs=5"], "env.kwargs"),
    ("list given a string", {}, ["tiny", _RUN, "eval.splits=valid_seen"], "eval.splits"),
    (
        "task_types given a number",
        {},
        ["tiny", _RUN, "env.name=alfworld", "env.kwargs.task_types=5"],
        "env.kwargs.task_types",
    ),
    ("choice not allowed", {}, ["tiny", _RUN, "algo.norm=median"], "mean_std, mean"),
    ("precision not allowed", {}, ["tiny", _RUN, "model.precision=fp8"], "model.precision"),
    ("distill kind not allowed", {}, ["tiny", _RUN, "distill.kind=bogus"], "distill.kind"),
    # ranges and finiteness
    ("negative seed", {}, ["tiny", _RUN, "seed=-7"], "'seed'"),
    ("seed too large", {}, ["tiny", _RUN, "seed=1099511627776"], "'seed'"),
    ("lr infinite", {}, ["tiny", _RUN, "algo.lr=.inf"], "algo.lr"),
    ("lr NaN", {}, ["tiny", _RUN, "algo.lr=.nan"], "algo.lr"),
    ("clip infinite", {}, ["tiny", _RUN, "algo.clip=.inf"], "algo.clip"),
    ("gigpo_gamma negative", {}, ["tiny", _RUN, "algo.gigpo_gamma=-5"], "algo.gigpo_gamma"),
    ("ema_decay above 1", {}, ["tiny", _RUN, "distill.ema_decay=5"], "distill.ema_decay"),
    ("holdout above 1", {}, ["tiny", _RUN, "sft.holdout=3"], "sft.holdout"),
    ("eval temperature negative", {}, ["tiny", _RUN, "eval.temperature=-1"], "eval.temperature"),
    ("rollout temperature negative", {}, ["tiny", _RUN, "rollout.temperature=-0.5"], "rollout.temperature"),
    ("eval.every negative", {}, ["tiny", _RUN, "eval.every=-1"], "eval.every"),
    ("zero updates", {}, ["tiny", _RUN, "train.updates=0"], "train.updates"),
    ("negative mini-batch size", {}, ["tiny", _RUN, "algo.mini_batch_size=-1"], "algo.mini_batch_size"),
    ("zero group size", {}, ["tiny", _RUN, "rollout.group_size=0"], "rollout.group_size"),
    ("negative max_steps", {}, ["tiny", _RUN, "env.max_steps=-1"], "env.max_steps"),
    ("expert share above 1", {}, ["tiny", _RUN, "warmup.expert_share=1.5"], "warmup.expert_share"),
    ("failed share above 1", {}, ["tiny", _RUN, "label.max_failed_share=2"], "label.max_failed_share"),
    ("negative retries", {}, ["tiny", _RUN, "label.openai.retries=-1"], "label.openai.retries"),
    ("response budget of 1e9", {}, ["tiny", _RUN, "rollout.max_response_tokens=1e9"], "rollout.max_response_tokens"),
    # what the values name
    ("empty run_dir", {}, ["tiny", "run_dir="], "run_dir"),
    ("run_dir is a file", {"afile": "x"}, ["tiny", "run_dir={tmp}/afile"], "run_dir"),
    ("unknown model name", {}, ["tiny", _RUN, "model.name=bogus-model"], "model.name"),
    ("missing model folder", {}, ["tiny", _RUN, "model.name=/nonexistent/model"], "model.name"),
    ("lora not a mapping", {}, ["tiny", _RUN, "model.lora=5"], "model.lora"),
    ("lora unknown key", {}, ["tiny", _RUN, "model.lora={rank: 4}"], "model.lora"),
    ("env kwarg unknown", {}, ["tiny", _RUN, "env.kwargs.bogus=1"], "env.kwargs"),
    ("env unknown", {}, ["tiny", _RUN, "env.name=chess"], "env.name"),
    (
        "task type unknown",
        {},
        ["tiny", _RUN, "env.name=alfworld", "env.kwargs.task_types=[fly]"],
        "env.kwargs.task_types",
    ),
    ("eval splits empty", {}, ["tiny", _RUN, "eval.splits=[]"], "eval.splits"),
    ("eval split unknown", {}, ["tiny", _RUN, "eval.splits=[test]"], "eval.splits"),
    (
        "library path missing",
        {},
        ["tiny", _RUN, "distill.kind=seed", "distill.skill_source=library", "distill.library_path={tmp}/nope.yaml"],
        "distill.library_path",
    ),
    (
        "library file not a mapping",
        {"lib.yaml": "- a\n- b\n"},
        ["tiny", _RUN, "distill.kind=seed", "distill.skill_source=library", "distill.library_path={tmp}/lib.yaml"],
        "distill.library_path",
    ),
    (
        "library path not given",
        {},
        ["tiny", _RUN, "distill.kind=seed", "distill.skill_source=library"],
        "distill.library_path",
    ),
    ("openai teacher without base_url", {}, ["tiny", _RUN, "label.teacher=openai"], "label.openai.base_url"),
    (
        "openai base_url without scheme",
        {},
        ["tiny", _RUN, "label.teacher=openai", "label.openai.model=m", "label.openai.base_url=localhost:8000"],
        "label.openai.base_url",
    ),
    ("api key file missing", {}, ["tiny", _RUN, "label.openai.api_key_file={tmp}/key"], "label.openai.api_key_file"),
    ("vllm on cpu", {}, ["tiny", _RUN, "generation.backend=vllm"], "generation.backend"),
    ("lora with FSDP ranks", {}, ["tiny", _RUN, "dist.train_processes=2", "model.lora={r: 4}"], "model.lora"),
    (
        "ema teacher with FSDP ranks",
        {},
        ["tiny", _RUN, "dist.train_processes=2", "distill.teacher_weights=ema"],
        "distill.teacher_weights",
    ),
]
if not torch.cuda.is_available():
    CASES.append(("cuda without a GPU", {}, ["tiny", _RUN, "model.device=cuda"], "model.device"))


def materialise(tmp, files: dict, args: list[str]) -> list[str]:
    """Create a case's files under `tmp` and return its arguments with {tmp} filled in."""
    for name, content in files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return [a.replace("{tmp}", str(tmp)) for a in args]


@pytest.mark.parametrize("name,files,args,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clean_message_and_writes_nothing(tmp_path, capsys, name, files, args, fragment):
    argv = materialise(tmp_path, files, args)
    before = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    assert main(["train", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("seed: config error:") and "\n" not in err, err
    assert fragment in err, err
    assert {p.relative_to(tmp_path) for p in tmp_path.rglob("*")} == before  # no run directory, no file


def test_base_paths_resolve_against_the_including_file(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "parent.yaml").write_text("base: tiny\nseed: 5\n")
    (tmp_path / "sub" / "child.yaml").write_text("base: parent.yaml\nenv: {max_steps: 2}\n")
    monkeypatch.chdir(tmp_path)  # the including file's folder, not the working directory, is where base is found
    cfg = load_config(tmp_path / "sub" / "child.yaml")
    assert cfg.seed == 5 and cfg.env.max_steps == 2 and cfg.model.name == "tiny-random"


def test_a_changed_config_needs_force_and_fixed_keys_never_change(tmp_path, capsys):
    run = tmp_path / "run"
    common = ["tiny", f"run_dir={run}", "train.updates=1", "warmup.enabled=false", "eval.episodes=2"]
    assert main(["train", *common]) == 0
    saved = (run / "config.yaml").read_text()
    assert main(["train", *common, "algo.lr=2e-4"]) == 2
    err = capsys.readouterr().err
    assert "algo.lr: 0.0001 -> 0.0002" in err and "--force" in err
    assert (run / "config.yaml").read_text() == saved  # refused: nothing overwritten
    assert main(["train", *common, "seed=3", "--force"]) == 2
    assert "seed can never change mid-run" in capsys.readouterr().err
    assert main(["train", *common, "train.updates=2"]) == 0  # extending a run is not a change
    assert main(["train", *common, "train.updates=2", "algo.lr=2e-4", "--force"]) == 0
    assert load_config(run / "config.yaml").algo.lr == 2e-4
    assert load_config(run / "config.1.yaml").algo.lr == 1e-4  # the old config is kept
