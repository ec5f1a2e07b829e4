"""Config files: a file may extend another through `base`; errors name the key."""

import pytest

from seed.config import ConfigError, load_config


def test_base_is_applied_first_and_sections_merge(tmp_path):
    (tmp_path / "child.yaml").write_text("base: default\nrun_dir: somewhere\nenv: {max_steps: 3}\n")
    cfg, default = load_config(tmp_path / "child.yaml"), load_config("default")
    assert cfg.run_dir == "somewhere" and cfg.env.max_steps == 3
    assert cfg.env.kwargs == default.env.kwargs and cfg.algo == default.algo


def test_base_cycles_and_bounds_are_reported_by_key(tmp_path):
    (tmp_path / "loop.yaml").write_text(f"base: {tmp_path / 'loop.yaml'}\n")
    with pytest.raises(ConfigError, match="'base'.*cycle"):
        load_config(tmp_path / "loop.yaml")
    with pytest.raises(ConfigError, match="'warmup.expert_share' = 1.5 must be <= 1"):
        load_config("default", ["warmup.expert_share=1.5"])
