"""Where a collector's environments live: in this process, or in Ray actors (`env.workers: N`).

Both pools answer the same two batched calls, one result per (slot, argument) pair, in order:

    reset([(slot, task_seed), ...]) -> [Obs | EnvFault, ...]
    step([(slot, action), ...])     -> [(Obs, reward, done, info) | EnvFault, ...]

A slot is one episode's env. An exception inside an env comes back as an `EnvFault` for that slot only. In the Ray
pool, slot s lives on actor s % N and each actor receives one call per turn for all its slots; an actor that dies
or does not answer within `step_timeout` seconds is killed and replaced, and each of its slots gets an `EnvFault`
for the call in flight (the collector drops those episodes and the run goes on). A replaced actor's envs are
rebuilt on their next reset.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from seed.envs.base import Env, checked_result

log = logging.getLogger(__name__)


@dataclass
class EnvFault:
    """In place of a result: the env call failed (an exception, a dead or hung worker)."""

    message: str


def _call(env: Env, method: str, arg: Any) -> Any:
    try:
        return checked_result(method, getattr(env, method)(arg))
    except Exception as exc:  # one env's fault is one slot's fault
        return EnvFault(f"{method} failed: {exc!r}\n{traceback.format_exc(limit=3)}")


class _Watchdog:
    """Runs env calls on a daemon thread and waits at most `timeout` seconds for each. A call that overruns is
    abandoned (its thread is left to finish or hang on its own; the process can still exit) and a fresh thread
    takes the next call."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._jobs: queue.Queue | None = None

    def _start(self) -> queue.Queue:
        jobs: queue.Queue = queue.Queue()

        def serve() -> None:
            while True:
                fn, box, done = jobs.get()
                box.append(fn())
                done.set()

        threading.Thread(target=serve, daemon=True, name="env-call").start()
        return jobs

    def run(self, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """(finished in time, result)."""
        if self._jobs is None:
            self._jobs = self._start()
        box: list = []
        done = threading.Event()
        self._jobs.put((fn, box, done))
        if done.wait(self.timeout):
            return True, box[0]
        self._jobs = None  # that thread is stuck: the next call gets a new one
        return False, None


class LocalEnvPool:
    """Envs in this process, created on first use and reused across collects. With `step_timeout > 0` each call
    runs under a watchdog: an env that does not answer in time gives an EnvFault and is replaced on its next use."""

    def __init__(self, env_factory: Callable[[], Env], step_timeout: float = 0.0):
        self.env_factory = env_factory
        self.envs: dict[int, Env] = {}
        self.watchdog = _Watchdog(step_timeout) if step_timeout > 0 else None

    def _env(self, slot: int) -> Env:
        if slot not in self.envs:
            self.envs[slot] = self.env_factory()
        return self.envs[slot]

    def _calls(self, method: str, calls: list[tuple[int, Any]]) -> list:
        out = []
        for slot, arg in calls:
            if self.watchdog is None:
                out.append(_call(self._env(slot), method, arg))
                continue
            finished, result = self.watchdog.run(lambda slot=slot, arg=arg: _call(self._env(slot), method, arg))
            if not finished:
                self.envs.pop(slot, None)  # never touched again: it may still be running
                result = EnvFault(f"{method} gave no answer within {self.watchdog.timeout:g}s (env.step_timeout)")
                log.warning("env slot %d: %s; the env is replaced", slot, result.message)
            out.append(result)
        return out

    def reset(self, calls: list[tuple[int, int]]) -> list:
        return self._calls("reset", calls)

    def step(self, calls: list[tuple[int, str]]) -> list:
        return self._calls("step", calls)

    def close(self) -> None:
        for env in self.envs.values():
            try:
                env.close()
            except Exception as exc:  # closing is best effort: a broken env must not fail the run's end
                log.warning("env close failed: %r", exc)
        self.envs.clear()


class EnvWorker:
    """The body of one Ray env actor: a LocalEnvPool answering batched calls."""

    def __init__(self, env_factory: Callable[[], Env]):
        self.pool = LocalEnvPool(env_factory)

    def reset(self, calls: list[tuple[int, int]]) -> list:
        return self.pool.reset(calls)

    def step(self, calls: list[tuple[int, str]]) -> list:
        return self.pool.step(calls)

    def pid(self) -> int:
        return os.getpid()


class RayEnvPool:
    """Envs in `workers` Ray actors; one batched remote call per actor per turn."""

    def __init__(
        self,
        env_factory: Callable[[], Env],
        workers: int,
        step_timeout: float = 60.0,
        ray_address: str | None = None,
        startup_timeout: float = 300.0,
    ):
        from seed.dist.ray_utils import cpus_per_worker, init_ray

        self.ray = init_ray(ray_address)
        self.env_factory, self.step_timeout, self.startup_timeout = env_factory, step_timeout, startup_timeout
        self._actor_cls = self.ray.remote(num_cpus=cpus_per_worker(workers))(EnvWorker)
        self.actors = [self._actor_cls.remote(env_factory) for _ in range(workers)]
        self.ray.get([a.pid.remote() for a in self.actors], timeout=startup_timeout)  # started, before any clock
        self.restarts = 0

    def _spawn(self):
        """A replacement actor, waited for: its start-up is not charged to the next call's step timeout."""
        actor = self._actor_cls.remote(self.env_factory)
        self.ray.get(actor.pid.remote(), timeout=self.startup_timeout)
        return actor

    def _batched(self, method: str, calls: list[tuple[int, Any]]) -> list:
        ray = self.ray
        n = len(self.actors)
        by_actor: dict[int, list[int]] = {}
        for i, (slot, _) in enumerate(calls):
            by_actor.setdefault(slot % n, []).append(i)
        futures = {a: getattr(self.actors[a], method).remote([calls[i] for i in idx]) for a, idx in by_actor.items()}
        results: list = [None] * len(calls)
        ready, _ = ray.wait(list(futures.values()), num_returns=len(futures), timeout=self.step_timeout)
        ready = set(ready)
        for a, fut in futures.items():
            idx = by_actor[a]
            try:
                if fut not in ready:
                    raise TimeoutError(f"no answer within {self.step_timeout:.0f}s")
                out = ray.get(fut)
            except Exception as exc:  # the actor died or hung: replace it, fail its slots
                fault = EnvFault(f"env worker {a} lost during {method}: {exc!r}")
                log.warning("%s; restarting it (slots %s dropped)", fault.message, [calls[i][0] for i in idx])
                ray.kill(self.actors[a], no_restart=True)
                self.actors[a] = self._spawn()
                self.restarts += 1
                out = [fault] * len(idx)
            for i, r in zip(idx, out):
                results[i] = r
        return results

    def reset(self, calls: list[tuple[int, int]]) -> list:
        return self._batched("reset", calls)

    def step(self, calls: list[tuple[int, str]]) -> list:
        return self._batched("step", calls)

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors.clear()


def make_env_pool(
    env_factory: Callable[[], Env], workers: int = 0, step_timeout: float = 60.0, ray_address: str | None = None
):
    """`workers=0`: envs in this process; `workers>=1`: in that many Ray actors."""
    if workers <= 0:
        return LocalEnvPool(env_factory, step_timeout)
    return RayEnvPool(env_factory, workers, step_timeout, ray_address)
