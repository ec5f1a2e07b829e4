"""Environment protocol and registry.

Envs know nothing about models: they take an action string and return text. An action that is not admissible
is a no-op step with `info["valid"] = False`; deciding what the *model* said is the agent's job (seed.agent).
"""
from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

__all__ = ["Obs", "Env", "register", "make", "available", "constructor_parameters", "checked_result",
           "ENV_SPLITS"]

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


def checked_result(method: str, result: Any) -> Any:
    """An env's return value if it keeps the protocol (reset -> Obs; step -> (Obs, number, bool, dict)), else a
    TypeError naming what came back."""
    if method == "reset":
        if not isinstance(result, Obs):
            raise TypeError(f"reset returned {type(result).__name__}, not Obs")
        return result
    if not (isinstance(result, tuple) and len(result) == 4):
        raise TypeError(f"step returned {type(result).__name__}, not (Obs, reward, done, info)")
    obs, reward, done, info = result
    if not isinstance(obs, Obs) or not isinstance(info, dict):
        raise TypeError(f"step returned ({type(obs).__name__}, ..., {type(info).__name__}), not (Obs, ..., dict)")
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real) or not math.isfinite(reward):
        raise TypeError(f"step returned reward {reward!r}, not a finite number")
    return obs, float(reward), bool(done), info


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


def constructor_parameters(name: str) -> set[str] | None:
    """The keyword arguments env `name` takes besides `split` (None when it takes any: **kwargs)."""
    _load_builtins()
    params = inspect.signature(_REGISTRY[name][0]).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.name not in ("self", "split")}


def make(name: str, split: str = "train", **kwargs: Any) -> Env:
    """Build an env by name. Errors name the allowed values."""
    _load_builtins()
    if name not in _REGISTRY:
        raise ValueError(f"unknown env {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    if split not in ENV_SPLITS:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(ENV_SPLITS)}")
    return _REGISTRY[name][0](split=split, **kwargs)
