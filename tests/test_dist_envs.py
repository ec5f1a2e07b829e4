"""Env workers in Ray actors: the same episodes as in-process envs, and a lost worker loses only its episodes."""

import functools
import sys
import time

import pytest

from seed.envs import make
from seed.models import HFBackend, Sampling, load_model, load_tokenizer
from seed.rollout.collector import Collector, RolloutSettings

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    from seed.dist.ray_utils import init_ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module
    init_ray()
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def backend():
    tok = load_tokenizer("tiny-random")
    return HFBackend(load_model("tiny-random", tok, seed=0), tok, precision="fp32")


SETTINGS = RolloutSettings(max_steps=4, history_length=1)
SOKOBAN = functools.partial(make, "sokoban", split="train", reverse_steps=4)
# The tiny random model rarely writes a valid action; a fixed response prefix would change what is tested, so the
# episodes are compared as they are (mostly invalid no-op steps, still four real env steps each).


def _collect(pool, backend, seed=0):
    backend.generator.manual_seed(seed)
    collector = Collector(SOKOBAN, "sokoban", backend.tokenizer, SETTINGS, pool=pool)
    episodes = collector.collect(backend, [11, 12], 2, Sampling(temperature=1.0, max_new_tokens=12))
    return collector, episodes


def _summary(episodes):
    return [
        (
            e.episode_id,
            e.task,
            e.won,
            e.score,
            e.error,
            [(s.action, s.valid, s.reward, s.state.observation) for s in e.steps],
        )
        for e in episodes
    ]


def test_ray_env_workers_produce_the_same_episodes_as_in_process_envs(local_ray, backend):
    from seed.dist import LocalEnvPool, RayEnvPool

    _, local = _collect(LocalEnvPool(SOKOBAN), backend)
    collector, remote = _collect(RayEnvPool(SOKOBAN, workers=2), backend)
    collector.close()
    assert _summary(remote) == _summary(local)
    assert all(len(e.steps) == SETTINGS.max_steps or e.won for e in local)


class KillWorkerAfter:
    """A real backend that kills env worker 0 after `turns` generation calls (a crash mid-rollout)."""

    def __init__(self, backend, pool, turns):
        self.backend, self.pool, self.turns, self.calls = backend, pool, turns, 0

    def generate(self, prompts, sampling, batch_size=64, images=None):
        self.calls += 1
        if self.calls == self.turns:
            ray.kill(self.pool.actors[0], no_restart=True)
        return self.backend.generate(prompts, sampling, batch_size, images)


def test_killing_an_env_worker_mid_rollout_loses_only_its_episodes(local_ray, backend):
    from seed.dist import RayEnvPool

    pool = RayEnvPool(SOKOBAN, workers=2)
    collector = Collector(SOKOBAN, "sokoban", backend.tokenizer, SETTINGS, pool=pool)
    episodes = collector.collect(
        KillWorkerAfter(backend, pool, turns=2), [11, 12], 2, Sampling(temperature=1.0, max_new_tokens=12)
    )
    lost = [slot for slot, e in enumerate(episodes) if e.error]
    assert lost == [0, 2]  # slots 0 and 2 live on worker 0
    assert all("env worker 0 lost" in episodes[s].error and len(episodes[s].steps) == 1 for s in lost)
    assert all(len(e.steps) == SETTINGS.max_steps for s, e in enumerate(episodes) if s not in lost)
    assert pool.restarts == 1
    again = collector.collect(backend, [11, 12], 2, Sampling(temperature=1.0, max_new_tokens=12))
    assert not any(e.error for e in again)  # the replacement worker serves the next rollout
    collector.close()


class HangingEnv:
    """Sokoban whose step on one task never returns in time (a hung simulator)."""

    def __init__(self):
        self.env, self.seed = make("sokoban", split="train", reverse_steps=4), None

    def reset(self, seed):
        self.seed = seed
        return self.env.reset(seed)

    def step(self, action):
        if self.seed == 12:
            time.sleep(30)
        return self.env.step(action)

    def close(self):
        self.env.close()


def test_a_hung_env_worker_is_replaced_after_the_timeout(local_ray, backend):
    from seed.dist import RayEnvPool

    pool = RayEnvPool(HangingEnv, workers=2, step_timeout=3)
    collector = Collector(HangingEnv, "sokoban", backend.tokenizer, SETTINGS, pool=pool)
    t0 = time.perf_counter()
    episodes = collector.collect(backend, [11, 12], 1, Sampling(temperature=1.0, max_new_tokens=12))
    assert time.perf_counter() - t0 < 25
    assert episodes[0].error is None and len(episodes[0].steps) == SETTINGS.max_steps
    assert "no answer within 3s" in episodes[1].error
    assert pool.restarts == 1
    collector.close()


def test_a_run_with_env_and_generation_workers_trains_and_evaluates(local_ray, tmp_path):
    from seed.config import load_config
    from seed.train.components import build_components
    from seed.train.metrics import read_metrics
    from seed.train.pipeline import eval_stage, train_stage

    cfg = load_config(
        "tiny",
        [
            f"run_dir={tmp_path}",
            "env.workers=2",
            "generation.workers=1",
            "train.updates=1",
            "distill.kind=seed",
            "distill.skill_source=policy",
            "distill.analyzer_max_new_tokens=8",
        ],
    )
    comps = build_components(cfg)
    assert train_stage(comps) == 1
    row = [r for r in read_metrics(tmp_path) if r["update"] == 1][0]
    assert row["rollout/dropped_episodes"] == 0 and row["train/samples"] > 0
    assert comps.remote.pushes >= 1
    results = eval_stage(comps, "final")
    assert all(r["overall"]["n"] == cfg.eval.episodes for r in results.values())
    comps.remote.close()
