"""Static skill libraries (SDAR-style, `distill.skill_source: library`): a YAML or JSON file of {task_type: skill}."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from seed.errors import ConfigError

SHIPPED_LIBRARIES = Path(__file__).resolve().parents[1] / "configs" / "skills"  # package data: <env>.yaml


def library_file(path_or_name: str) -> Path:
    """A library file: the path given, or the shipped library of that name (`sokoban`: the package's own)."""
    p = Path(path_or_name).expanduser()
    shipped = SHIPPED_LIBRARIES / (path_or_name if p.suffix in (".yaml", ".yml") else f"{path_or_name}.yaml")
    if p.is_file() or not shipped.is_file():
        return p
    return shipped


def read_skill_library(path: str) -> dict[str, str]:
    """The library's skills; a ConfigError naming `distill.library_path` when the file is missing or malformed."""
    p = library_file(path)
    try:
        text = p.read_text()
        data = yaml.safe_load(text) if p.suffix in (".yaml", ".yml") else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"config key 'distill.library_path' = {path!r} cannot be read: {' '.join(str(exc).split())[:200]}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config key 'distill.library_path' = {path!r}: expected a mapping of task type -> skill")
    return {str(k): str(v) for k, v in data.items()}
