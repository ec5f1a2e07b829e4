"""Multi-turn rollouts in groups.

Each task seed gets G episodes that share its initial state. At every turn only the episodes that are still
running are rendered and sent to the backend: a finished episode leaves the generation batch at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from seed.agent import left_truncate, parse_action, prompt_images, render
from seed.dist.env_pool import EnvFault, LocalEnvPool
from seed.envs.base import Env, Obs, action_tags
from seed.models.backend import Sampling
from seed.types import Episode, StepSample, StepState

log = logging.getLogger(__name__)


@dataclass
class RolloutSettings:
    max_steps: int = 30
    history_length: int = 5
    invalid_penalty: float = 0.1
    success_reward: float = 10.0
    max_prompt_tokens: int = 2048  # longer prompts are left-truncated to this, and counted
    generation_batch_size: int = 64
    validity: str = "format"  # seed.agent.parse: format (official) or admissible


class _Running:
    """One live episode: its env slot, its last observation and its history window."""

    def __init__(self, slot: int, episode: Episode, obs: Obs, env_name: str):
        self.slot, self.episode, self.obs, self.env_name = slot, episode, obs, env_name
        self.history: list[tuple[str, str]] = []
        self.done = False

    def state(self, k: int) -> StepState:
        return StepState.after(self.env_name, self.obs, self.history, k, len(self.episode.steps))


class Collector:
    """Runs grouped, multi-turn episodes on a backend; the envs live in a pool (this process or Ray actors)."""

    def __init__(self, env_factory: Callable[[], Env], env_name: str, tokenizer, settings: RolloutSettings, pool=None):
        self.env_factory, self.env_name, self.tokenizer, self.settings = env_factory, env_name, tokenizer, settings
        self.pool = pool if pool is not None else LocalEnvPool(env_factory)
        self.tags = action_tags(env_name)  # what the responses put the action in

    def collect(
        self,
        backend,
        task_seeds: list[int],
        group_size: int,
        sampling: Sampling,
        id_prefix: str = "",
        progress: Callable[[int], None] | None = None,
    ) -> list[Episode]:
        """Run every episode to the end."""
        s = self.settings
        episodes = [
            Episode(episode_id=f"{id_prefix}t{seed}-g{g}", group_id=t, task_seed=seed, task="", task_type="")
            for t, seed in enumerate(task_seeds)
            for g in range(group_size)
        ]
        resets = self.pool.reset([(slot, ep.task_seed) for slot, ep in enumerate(episodes)])
        running: list[_Running] = []
        for slot, (ep, obs) in enumerate(zip(episodes, resets)):
            if isinstance(obs, EnvFault):  # a broken task loses its episode, not the run
                self._drop(ep, obs)
                r = _Running(slot, ep, Obs(text="", task=""), self.env_name)
                r.done = True
            else:
                ep.task, ep.task_type = obs.task, obs.task_type
                r = _Running(slot, ep, obs, self.env_name)
            running.append(r)

        for _ in range(s.max_steps):
            live = [r for r in running if not r.done]
            if not live:
                break
            states = [r.state(s.history_length) for r in live]
            full = [render(st, self.tokenizer) for st in states]
            prompts = [left_truncate(ids, s.max_prompt_tokens) for ids in full]
            gens = backend.generate(prompts, sampling, batch_size=s.generation_batch_size, images=prompt_images(states))
            parsed = [parse_action(gen.text, st.admissible, s.validity, self.tags) for gen, st in zip(gens, states)]
            results = self.pool.step([(r.slot, self._sent(p)) for r, p in zip(live, parsed)])
            for r, st, ids, prompt, gen, p, result in zip(live, states, full, prompts, gens, parsed, results):
                if isinstance(result, EnvFault):
                    self._drop(r.episode, result)
                    r.done = True
                    continue
                obs, _, done, info = result  # outcome RL: the env's own reward is not trained on
                valid = p.valid if s.validity == "format" else p.valid and bool(info.get("valid", True))
                reward = 0.0
                if not valid:
                    reward -= s.invalid_penalty
                if obs.won:
                    reward += s.success_reward
                r.episode.steps.append(
                    StepSample(
                        state=st,
                        prompt_ids=prompt,
                        response_ids=gen.ids,
                        rollout_logps=gen.logps,
                        response_text=gen.text,
                        action=p.action,
                        valid=valid,
                        reward=reward,
                        episode_id=r.episode.episode_id,
                        group_id=r.episode.group_id,
                        step_index=st.step_index,
                        truncated_prompt=len(ids) > len(prompt),
                    )
                )
                r.history.append((r.obs.text, self._sent(p) or gen.text.strip()[-200:]))
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

    def _sent(self, parsed) -> str:
        """What the env receives: under `format` the extracted action whatever it is (the env answers an
        inadmissible one itself), under `admissible` only a valid action ("" is a no-op)."""
        return parsed.action if self.settings.validity == "format" or parsed.valid else ""

    @staticmethod
    def _drop(episode: Episode, fault: EnvFault) -> None:
        episode.error = fault.message.splitlines()[0]
        log.warning("episode %s dropped: %s", episode.episode_id, fault.message)

    def close(self) -> None:
        self.pool.close()
