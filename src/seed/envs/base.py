"""Environment protocol and registry.

Envs know nothing about models: they take an action string and return text. An action that is not admissible
is a no-op step with `info["valid"] = False`; deciding what the *model* said is the agent's job (seed.agent).
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Obs",
    "Env",
    "register",
    "make",
    "available",
    "intro",
    "argument_choices",
    "constructor_parameters",
    "checked_result",
    "ENV_SPLITS",
]

ENV_SPLITS = ("train", "valid_seen", "valid_unseen")


@dataclass
class Obs:
    """What an env shows after reset/step."""

    text: str
    task: str
    admissible: list[str] = field(default_factory=list)
    won: bool = False
    task_type: str = ""
    images: list[Any] = field(default_factory=list)  # frames (PIL images) for vision-language policies
    intro: str = ""  # the prompt's opening sentence where it is not the env class's `intro` (a served env's)


@runtime_checkable
class Env(Protocol):
    name: str
    split: str
    intro: str  # the sentence every prompt of this env opens with, before the task

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


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., Env]
    description: str
    choices: dict[str, tuple[str, ...]]  # constructor argument -> the values it allows (config validation)


_REGISTRY: dict[str, _Entry] = {}
_PLUGIN_GROUP = "seed.envs"  # entry points: name = "package.module" whose import registers env `name`


def register(name: str, description: str, choices: dict[str, Sequence[str]] | None = None) -> Callable:
    """Class decorator: `@register("sokoban", "...")` makes the env available to `make`.

    The env's `intro` (the sentence its prompts open with) is read here, so a class without one fails at once.
    `choices` names the allowed values of constructor arguments that take names (e.g. task types), so a config
    is checked before any work starts."""

    def wrap(factory: Callable[..., Env]) -> Callable[..., Env]:
        if not isinstance(getattr(factory, "intro", None), str):
            raise TypeError(f"env {name!r}: {factory!r} has no `intro` (the str its prompts open with)")
        _REGISTRY[name] = _Entry(factory, description, {k: tuple(v) for k, v in (choices or {}).items()})
        return factory

    return wrap


@functools.cache
def _discover() -> None:
    """Import the modules that register envs, once: the package's own (`seed.envs.builtins`) and those other
    packages name under the `seed.envs` entry-point group. Imported lazily, so `seed.envs.base` stays light."""
    from importlib import import_module
    from importlib.metadata import entry_points

    from seed.envs.builtins import BUILTIN_MODULES

    for module in BUILTIN_MODULES:
        try:
            import_module(module)
        except ImportError as exc:  # an env whose own dependencies are missing here (a served env's process)
            _UNAVAILABLE[module] = f"{type(exc).__name__}: {exc}"
    for point in entry_points(group=_PLUGIN_GROUP):
        if point.name not in _REGISTRY:
            point.load()


_UNAVAILABLE: dict[str, str] = {}  # built-in env module -> why it could not be imported


def _lookup(name: str) -> _Entry:
    _discover()
    if name not in _REGISTRY and ":" in name:
        _import_class(name)
    if name not in _REGISTRY:
        missing = "".join(f"; {module} could not be imported ({why})" for module, why in _UNAVAILABLE.items())
        raise ValueError(f"unknown env {name!r}; available: {', '.join(sorted(_REGISTRY))}{missing}")
    return _REGISTRY[name]


def _import_class(path: str) -> None:
    """Register a user's env class named as `module:Class` (importable from the working directory or
    PYTHONPATH) under that name, so that `env.name: my_envs:Corridor` needs no entry point."""
    from importlib import import_module

    module, _, attr = path.partition(":")
    try:
        factory = getattr(import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"env {path!r}: cannot import {attr} from {module} ({type(exc).__name__}: {exc})") from exc
    register(path, (factory.__doc__ or path).strip().splitlines()[0])(factory)


def available() -> dict[str, str]:
    """Registered env names and one-line descriptions."""
    _discover()
    return {k: e.description for k, e in sorted(_REGISTRY.items())}


def intro(name: str) -> str:
    """The sentence env `name`'s prompts open with (the renderer's only knowledge of an env)."""
    return _lookup(name).factory.intro


DEFAULT_ACTION_TAGS = ("action",)


def action_tags(name: str) -> tuple[str, ...]:
    """The tags env `name`'s answers put the action in (its class's `action_tags`; `<action>` by default)."""
    return tuple(getattr(_lookup(name).factory, "action_tags", DEFAULT_ACTION_TAGS))


def answer_format(name: str) -> str | None:
    """The instruction that closes env `name`'s prompts, where its class sets one (`answer_format`)."""
    return getattr(_lookup(name).factory, "answer_format", None)


def argument_choices(name: str) -> dict[str, tuple[str, ...]]:
    """Constructor arguments of env `name` that take names, and the names each allows."""
    return dict(_lookup(name).choices)


def constructor_parameters(name: str) -> set[str] | None:
    """The keyword arguments env `name` takes besides `split` (None when it takes any: **kwargs)."""
    params = inspect.signature(_lookup(name).factory).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.name not in ("self", "split")}


def make(name: str, split: str = "train", **kwargs: Any) -> Env:
    """Build an env by name. Errors name the allowed values."""
    entry = _lookup(name)
    if split not in ENV_SPLITS:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(ENV_SPLITS)}")
    return entry.factory(split=split, **kwargs)
