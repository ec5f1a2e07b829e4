"""Multi-turn rollouts in groups.

Each task seed gets G episodes that share its initial state. At every turn only the episodes that are still
running are rendered and sent to the backend: a finished episode leaves the generation batch at once.
"""
from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from typing import Callable

from seed.agent import parse_action, render
from seed.envs.base import Env, Obs
from seed.models.backend import Sampling
from seed.rollout.types import Episode, StepSample, StepState

log = logging.getLogger(__name__)


@dataclass
class RolloutSettings:
    max_steps: int = 30
    history_length: int = 5
    invalid_penalty: float = 0.1
    success_reward: float = 10.0
    max_prompt_tokens: int = 2048
    generation_batch_size: int = 64


class _Running:
    """One live episode: its env, its last observation and its history window."""

    def __init__(self, env: Env, episode: Episode, obs: Obs, env_name: str):
        self.env, self.episode, self.obs, self.env_name = env, episode, obs, env_name
        self.history: list[tuple[str, str]] = []
        self.done = False

    def state(self, k: int) -> StepState:
        return StepState.after(self.env_name, self.obs, self.history, k, len(self.episode.steps))


class Collector:
    """Keeps a pool of env instances and runs grouped, multi-turn episodes on a backend."""

    def __init__(self, env_factory: Callable[[], Env], env_name: str, tokenizer, settings: RolloutSettings):
        self.env_factory, self.env_name, self.tokenizer, self.settings = env_factory, env_name, tokenizer, settings
        self._pool: list[Env] = []

    def _envs(self, n: int) -> list[Env]:
        while len(self._pool) < n:
            self._pool.append(self.env_factory())
        return self._pool[:n]

    def collect(self, backend, task_seeds: list[int], group_size: int, sampling: Sampling,
                id_prefix: str = "", progress: Callable[[int], None] | None = None,
                lockstep: bool = False) -> list[Episode]:
        """Run every episode to the end. `lockstep=True` imitates collectors that keep generating for finished
        episodes (their outputs are discarded); it exists only so benchmarks can measure what compaction saves."""
        s = self.settings
        envs = self._envs(len(task_seeds) * group_size)
        running: list[_Running] = []
        for t, seed in enumerate(task_seeds):
            for g in range(group_size):
                env = envs[t * group_size + g]
                ep = Episode(episode_id=f"{id_prefix}t{seed}-g{g}", group_id=t, task_seed=seed, task="", task_type="")
                try:
                    obs = env.reset(seed)
                except Exception as exc:  # a broken task loses its episode, not the run
                    ep.error = f"reset failed: {exc!r}"
                    log.warning("episode %s dropped: %s", ep.episode_id, ep.error)
                    r = _Running(env, ep, Obs(text="", task=""), self.env_name)
                    r.done = True
                    running.append(r)
                    continue
                ep.task, ep.task_type = obs.task, obs.task_type
                running.append(_Running(env, ep, obs, self.env_name))

        for _ in range(s.max_steps):
            live = [r for r in running if not r.done]
            if not live:
                break
            states = [r.state(s.history_length) for r in live]
            prompts = [render(st, self.tokenizer) for st in states]
            wasted = [render(r.state(s.history_length), self.tokenizer) for r in running if r.done] if lockstep else []
            gens = backend.generate(prompts + wasted, sampling, batch_size=s.generation_batch_size)[:len(prompts)]
            for r, st, prompt, gen in zip(live, states, prompts, gens):
                parsed = parse_action(gen.text, st.admissible)
                reward = 0.0
                try:
                    obs, env_reward, done, info = r.env.step(parsed.action if parsed.valid else "")
                except Exception as exc:
                    r.episode.error = f"step failed: {exc!r}"
                    log.warning("episode %s dropped: %s\n%s", r.episode.episode_id, exc, traceback.format_exc())
                    r.done = True
                    continue
                valid = parsed.valid and bool(info.get("valid", True))
                if not valid:
                    reward -= s.invalid_penalty
                if obs.won:
                    reward += s.success_reward
                r.episode.steps.append(StepSample(
                    state=st, prompt_ids=prompt, response_ids=gen.ids, rollout_logps=gen.logps,
                    response_text=gen.text, action=parsed.action, valid=valid, reward=reward,
                    episode_id=r.episode.episode_id, group_id=r.episode.group_id, step_index=st.step_index,
                    truncated_prompt=len(prompt) > s.max_prompt_tokens))
                r.history.append((r.obs.text, parsed.action if valid else gen.text.strip()[-200:]))
                r.obs = obs
                if done or obs.won:
                    r.done = True
            if progress:
                progress(len(live))
        for r in running:
            ep = r.episode
            ep.won = bool(r.obs.won) if ep.error is None else False
            ep.score = s.success_reward * ep.won - s.invalid_penalty * ep.num_invalid
        return [r.episode for r in running]

    def close(self) -> None:
        for env in self._pool:
            env.close()
        self._pool.clear()
