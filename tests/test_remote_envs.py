"""Envs served over HTTP (`python -m seed.envs.serve`) on 127.0.0.1 in another process, and the `remote` client."""

import functools
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from seed.dist.env_pool import EnvFault, LocalEnvPool
from seed.envs import make
from seed.envs.remote import RemoteClient, RemoteError
from seed.models import HFBackend, Sampling, load_model
from seed.rollout.collector import Collector, RolloutSettings

SRC = Path(__file__).resolve().parents[1] / "src"


def serve(env: str, python: str = sys.executable, extra_path: str = "", *args: str):
    """A server process on a free port; (process, url) once it listens."""
    env_vars = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), extra_path) if p)}
    proc = subprocess.Popen(
        [python, "-m", "seed.envs.serve", env, "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_vars,
    )
    line = proc.stdout.readline()
    if not line.startswith("serving"):
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r} {proc.stderr.read()[-2000:]}")
    return proc, line.split(" on ")[1].strip()


@pytest.fixture(scope="module")
def sokoban_server():
    proc, url = serve("sokoban")
    yield url
    proc.kill()
    proc.wait()


def _play(env, seed: int, actions: list[str]) -> list[tuple]:
    obs = env.reset(seed)
    trace = [(obs.text, obs.task, obs.admissible, obs.won)]
    for action in actions:
        obs, reward, done, info = env.step(action)
        trace.append((obs.text, obs.admissible, obs.won, reward, done, info["valid"]))
    return trace


def test_a_served_env_plays_exactly_as_the_in_process_one(sokoban_server):
    remote, local = make("remote", "valid_unseen", url=sokoban_server), make("sokoban", "valid_unseen")
    for seed in range(4):
        local.reset(seed)
        actions = ["jump", "left", *local.expert_plan(), "up"]
        assert _play(remote, seed, actions) == _play(local, seed, actions)
        remote.reset(seed)
        local.reset(seed)
        assert remote.expert_plan() == local.expert_plan()
    remote.close()


def test_frames_travel_and_the_served_envs_intro_opens_the_prompt(sokoban_server):
    from seed.agent import render
    from seed.models import load_tokenizer
    from seed.types import StepState

    remote = make("remote", "train", url=sokoban_server, render="rgb")
    local = make("sokoban", "train", render="rgb")
    a, b = remote.reset(2), local.reset(2)
    assert a.images[0].tobytes() == b.images[0].tobytes() and a.intro == b.intro != ""
    tok = load_tokenizer("tiny-random")  # frames need a VLM's template: the text prompts are compared
    text = make("remote", "train", url=sokoban_server)
    remote_state = StepState.after("remote", text.reset(2), [], 2, 0)
    local_state = StepState.after("sokoban", make("sokoban", "train").reset(2), [], 2, 0)
    assert render(remote_state, tok) == render(local_state, tok)  # "You are an expert agent playing Sokoban..."


def test_one_request_batches_calls_on_many_sessions_and_a_bad_call_fails_alone(sokoban_server):
    client = RemoteClient(sokoban_server)
    s1, s2 = (client.one({"op": "open", "split": "train"})["session"] for _ in range(2))
    results = client.call(
        [
            {"op": "reset", "session": s1, "seed": 1},
            {"op": "reset", "session": s2, "seed": 2},
            {"op": "fly", "session": s1},
            {"op": "step", "session": "nope", "action": "up"},
            {"op": "step", "session": s2, "action": "up"},
        ]
    )
    assert results[0]["obs"]["text"] != results[1]["obs"]["text"]
    assert "unknown op 'fly'" in results[2]["error"] and "no session 'nope'" in results[3]["error"]
    assert results[4]["info"]["valid"] is True
    with pytest.raises(RemoteError, match="HTTP 400"):
        client._request("POST", "/v1", {"version": 99, "calls": []})


def test_a_dead_server_is_an_episode_fault_not_a_crash():
    proc, url = serve("sokoban")
    factory = functools.partial(make, "remote", split="train", url=url, timeout=2.0, retries=1)
    pool = LocalEnvPool(factory)
    assert all(not isinstance(r, EnvFault) for r in pool.reset([(0, 1), (1, 2)]))
    proc.kill()
    proc.wait()
    results = pool.step([(0, "up"), (1, "down")])
    assert all(isinstance(r, EnvFault) and "no answer" in r.message for r in results)
    with pytest.raises(RemoteError, match="no answer after 2 tries"):
        make("remote", "train", url=url, timeout=1.0, retries=1)


def test_a_users_module_class_is_served(tmp_path):
    (tmp_path / "toy_served.py").write_text(
        "from seed.envs.base import Obs\n"
        "class Counter:\n"
        "    name, intro = 'counter', 'You count.'\n"
        "    def __init__(self, split='train', target=3):\n"
        "        self.split, self.target, self.n = split, target, 0\n"
        "    def _obs(self):\n"
        "        return Obs(f'at {self.n}', f'reach {self.target}', ['inc'], self.n >= self.target)\n"
        "    def reset(self, seed):\n"
        "        self.n = 0\n"
        "        return self._obs()\n"
        "    def step(self, action):\n"
        "        self.n += action == 'inc'\n"
        "        obs = self._obs()\n"
        "        return obs, float(obs.won), obs.won, {'valid': action == 'inc'}\n"
        "    def expert_plan(self):\n"
        "        return ['inc'] * (self.target - self.n)\n"
        "    def close(self):\n"
        "        pass\n"
    )
    proc, url = serve("toy_served:Counter", sys.executable, str(tmp_path), "--kwargs", '{"target": 2}')
    try:
        env = make("remote", "train", url=url)
        obs = env.reset(0)
        assert obs.intro == "You count." and obs.task == "reach 2" and env.expert_plan() == ["inc", "inc"]
        assert env.step("inc")[0].text == "at 1" and env.step("inc")[2]
    finally:
        proc.kill()
        proc.wait()


def test_the_server_runs_in_a_virtualenv_without_torch(tmp_path, tokenizer):
    """The env's own dependencies and the standard library: a bare virtualenv serves text Sokoban, and a rollout
    collected through it equals the in-process one, token for token."""
    venv.EnvBuilder(with_pip=False).create(tmp_path / "bare")
    python = str(tmp_path / "bare" / "bin" / "python")
    assert subprocess.run([python, "-c", "import torch"], capture_output=True).returncode != 0
    proc, url = serve("sokoban", python)
    try:
        model = load_model("tiny-random", tokenizer, seed=0)
        settings = RolloutSettings(max_steps=3, history_length=2)
        episodes = {}
        for where, factory in (
            ("remote", functools.partial(make, "remote", split="train", url=url)),
            ("local", functools.partial(make, "sokoban", split="train")),
        ):
            backend = HFBackend(model, tokenizer, precision="fp32", seed=0)
            name = "remote" if where == "remote" else "sokoban"
            collector = Collector(factory, name, tokenizer, settings)
            episodes[where] = collector.collect(backend, [5, 6], 2, Sampling(max_new_tokens=12))
            collector.close()
        for a, b in zip(episodes["remote"], episodes["local"]):
            assert [s.prompt_ids for s in a.steps] == [s.prompt_ids for s in b.steps]
            assert [(s.response_ids, s.action, s.valid) for s in a.steps] == [
                (s.response_ids, s.action, s.valid) for s in b.steps
            ]
            assert (a.won, a.task) == (b.won, b.task)
    finally:
        proc.kill()
        proc.wait()
