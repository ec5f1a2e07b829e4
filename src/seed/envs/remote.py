"""The `remote` env: an env served by `python -m seed.envs.serve` in another process, virtualenv or machine.

    env: {name: remote, kwargs: {url: "http://127.0.0.1:8765", timeout: 30, retries: 2, ...the served env's own}}

Each instance opens one session on the server (split and the remaining kwargs go to the served env's
constructor). A call that times out or finds no server is retried `retries` times on a fresh connection, then
raises: the env pool turns that into a fault of the episode, not of the run. The prompt opens with the served
env's own intro (`Obs.intro`). Standard library only.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from seed.envs.base import Obs, register
from seed.envs.protocol import PROTOCOL_VERSION, obs_from_json


class RemoteError(RuntimeError):
    """The server answered a call with an error, or could not be reached."""


class RemoteClient:
    """JSON calls to one env server, batched: `call([...])` answers one result per call, in order."""

    def __init__(self, url: str, timeout: float = 30.0, retries: int = 2, backoff: float = 0.5):
        self.url, self.timeout, self.retries, self.backoff = url.rstrip("/"), timeout, retries, backoff

    def info(self) -> dict:
        return self._request("GET", "/v1/info", None)

    def call(self, calls: list[dict]) -> list[dict]:
        reply = self._request("POST", "/v1", {"version": PROTOCOL_VERSION, "calls": calls})
        results = reply.get("results")
        if not isinstance(results, list) or len(results) != len(calls):
            raise RemoteError(f"{self.url}: {len(calls)} calls answered by {reply!r:.200}")
        return results

    def one(self, call: dict) -> dict:
        (result,) = self.call([call])
        if "error" in result:
            raise RemoteError(f"{self.url} {call.get('op')}: {result['error']}")
        return result

    def _request(self, method: str, path: str, body: dict | None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(
                self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:  # the server answered: a refusal is not retried
                raise RemoteError(f"{self.url}{path}: HTTP {exc.code}: {exc.read()[:300]!r}") from exc
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last = exc
                if attempt < self.retries:
                    time.sleep(self.backoff * (attempt + 1))
        raise RemoteError(f"{self.url}{path}: no answer after {self.retries + 1} tries ({last!r})")


@register("remote", "an env served over HTTP by `python -m seed.envs.serve` (env.kwargs: url, then its own options)")
class RemoteEnv:
    name = "remote"
    intro = "You are an expert agent."  # the served env's own intro opens every prompt (Obs.intro)

    def __init__(self, split: str = "train", url: str = "", timeout: float = 30.0, retries: int = 2, **kwargs: Any):
        if not url:
            raise ValueError("env 'remote' needs env.kwargs.url (where `python -m seed.envs.serve` listens)")
        self.split, self.client = split, RemoteClient(url, timeout, retries)
        info = self.client.info()
        if info.get("version") != PROTOCOL_VERSION:
            raise RemoteError(f"{url} speaks protocol version {info.get('version')!r}; this client speaks 1")
        self.served_intro = info.get("intro", "")
        self.session = self.client.one({"op": "open", "split": split, "kwargs": kwargs})["session"]

    def _obs(self, data: dict) -> Obs:
        obs = obs_from_json(data)
        obs.intro = obs.intro or self.served_intro
        return obs

    def reset(self, seed: int) -> Obs:
        return self._obs(self.client.one({"op": "reset", "session": self.session, "seed": seed})["obs"])

    def step(self, action: str) -> tuple[Obs, float, bool, dict]:
        out = self.client.one({"op": "step", "session": self.session, "action": action})
        return self._obs(out["obs"]), float(out["reward"]), bool(out["done"]), dict(out["info"])

    def expert_plan(self) -> list[str]:
        return list(self.client.one({"op": "expert_plan", "session": self.session})["plan"])

    def close(self) -> None:
        try:
            self.client.one({"op": "close", "session": self.session})
        except RemoteError:  # a server that is gone has nothing left to close
            pass
