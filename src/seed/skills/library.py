"""Static skill libraries (SDAR-style, `distill.skill_source: library`): a YAML or JSON file of {task_type: skill}."""
from __future__ import annotations

import json
from pathlib import Path

import yaml


def read_skill_library(path: str) -> dict[str, str]:
    """The library's skills; a ConfigError naming `distill.library_path` when the file is missing or malformed."""
    from seed.config import ConfigError

    p = Path(path)
    try:
        text = p.read_text()
        data = yaml.safe_load(text) if p.suffix in (".yaml", ".yml") else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"config key 'distill.library_path' = {path!r} cannot be read: "
                          f"{' '.join(str(exc).split())[:200]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config key 'distill.library_path' = {path!r}: expected a mapping of task type -> skill")
    return {str(k): str(v) for k, v in data.items()}
