"""Environment protocol and registry.

Envs know nothing about models: they take an action string and return text. An action that is not admissible
is a no-op step with `info["valid"] = False`; deciding what the *model* said is the agent's job (seed.agent).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

__all__ = ["Obs", "Env", "register", "make", "available", "ENV_SPLITS"]

ENV_SPLITS = ("train", "valid_seen", "valid_unseen")


@dataclass
class Obs:
    """What an env shows after reset/step."""

    text: str
    task: str
    admissible: list[str] = field(default_factory=list)
    won: bool = False
    task_type: str = ""
    images: list[Any] = field(default_factory=list)


@runtime_checkable
class Env(Protocol):
    name: str
    split: str

    def reset(self, seed: int) -> Obs: ...

    def step(self, action: str) -> tuple[Obs, float, bool, dict]: ...

    def expert_plan(self) -> list[str]: ...

    def close(self) -> None: ...


_REGISTRY: dict[str, tuple[Callable[..., Env], str]] = {}


def register(name: str, description: str) -> Callable:
    """Class decorator: `@register("sokoban", "...")` makes the env available to `make`."""

    def wrap(factory: Callable[..., Env]) -> Callable[..., Env]:
        _REGISTRY[name] = (factory, description)
        return factory

    return wrap


def _load_builtins() -> None:
    # Imported lazily so `seed.envs.base` stays light; each module registers itself.
    from seed.envs import alfworld, sokoban  # noqa: F401


def available() -> dict[str, str]:
    """Registered env names and one-line descriptions."""
    _load_builtins()
    return {k: d for k, (_, d) in sorted(_REGISTRY.items())}


def make(name: str, split: str = "train", **kwargs: Any) -> Env:
    """Build an env by name. Errors name the allowed values."""
    _load_builtins()
    if name not in _REGISTRY:
        raise ValueError(f"unknown env {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    if split not in ENV_SPLITS:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(ENV_SPLITS)}")
    return _REGISTRY[name][0](split=split, **kwargs)
