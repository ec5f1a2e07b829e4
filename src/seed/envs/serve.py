"""Serve an env over HTTP (`seed.envs.protocol`), so that it runs in its own process, virtualenv or machine:

    python -m seed.envs.serve sokoban --port 8765
    python -m seed.envs.serve my_package.my_env:MyEnv --port 8765

NAME is a registered env or a `module:Class` of the user's. The server needs the env's own dependencies and the
standard library only: it imports the env's module and `seed.envs`' protocol, never torch. Sessions are env
instances; one request may batch calls on many. It prints `serving NAME on http://HOST:PORT` once listening
(`--port 0` picks a free port).
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from seed.envs.base import ENV_SPLITS, checked_result, make
from seed.envs.protocol import OPS, PROTOCOL_VERSION, obs_to_json


def env_class(spec: str):
    """A registered env's name, or `module:Class`: what builds the served env (called with split and kwargs)."""
    if ":" in spec:
        module, _, name = spec.partition(":")
        return getattr(importlib.import_module(module), name)
    return lambda split, **kwargs: make(spec, split=split, **kwargs)


class EnvServer:
    """The served env's sessions, and the calls on them (thread-safe: one lock per session)."""

    def __init__(self, spec: str, default_kwargs: dict | None = None):
        self.spec, self.build, self.default_kwargs = spec, env_class(spec), dict(default_kwargs or {})
        self.sessions: dict[str, Any] = {}
        self.locks: dict[str, threading.Lock] = {}
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        probe = self.build("train", **self.default_kwargs)
        self.intro = getattr(probe, "intro", "")
        probe.close()

    def info(self) -> dict:
        return {"version": PROTOCOL_VERSION, "env": self.spec, "intro": self.intro, "splits": list(ENV_SPLITS)}

    def handle(self, calls: list[dict]) -> list[dict]:
        out = []
        for call in calls:
            try:
                out.append(self._call(call))
            except Exception as exc:  # one call's fault answers that call only
                out.append({"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=3)})
        return out

    def _call(self, call: dict) -> dict:
        op = call.get("op")
        if op not in OPS:
            raise ValueError(f"unknown op {op!r}; allowed: {', '.join(OPS)}")
        if op == "open":
            env = self.build(call.get("split", "train"), **{**self.default_kwargs, **call.get("kwargs", {})})
            with self.lock:
                session = f"s{next(self.ids)}"
                self.sessions[session], self.locks[session] = env, threading.Lock()
            return {"session": session}
        session = call.get("session")
        if session not in self.sessions:
            raise KeyError(f"no session {session!r} (open one first)")
        env = self.sessions[session]
        with self.locks[session]:
            if op == "reset":
                return {"obs": obs_to_json(checked_result("reset", env.reset(int(call["seed"]))))}
            if op == "step":
                obs, reward, done, info = checked_result("step", env.step(str(call["action"])))
                return {"obs": obs_to_json(obs), "reward": reward, "done": done, "info": _plain(info)}
            if op == "expert_plan":
                return {"plan": [str(a) for a in env.expert_plan()]}
            env.close()
        with self.lock:
            self.sessions.pop(session, None)
            self.locks.pop(session, None)
        return {}


def _plain(info: dict) -> dict:
    """The info values JSON can carry (others become their repr)."""
    return {str(k): v if isinstance(v, (str, int, float, bool, type(None), list)) else repr(v) for k, v in info.items()}


def make_handler(server: EnvServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet: a rollout makes thousands of calls
            pass

        def _reply(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path != "/v1/info":
                return self._reply(404, {"error": f"no route {self.path}"})
            self._reply(200, server.info())

        def do_POST(self) -> None:
            if self.path != "/v1":
                return self._reply(404, {"error": f"no route {self.path}"})
            try:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            except (ValueError, json.JSONDecodeError) as exc:
                return self._reply(400, {"error": f"not JSON: {exc}"})
            if request.get("version") != PROTOCOL_VERSION:
                return self._reply(400, {"error": f"protocol version {request.get('version')!r}; served: 1"})
            self._reply(200, {"version": PROTOCOL_VERSION, "results": server.handle(request.get("calls", []))})

    return Handler


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Serve an env over HTTP (seed.envs.protocol)")
    ap.add_argument("env", help="a registered env name, or module:Class")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765, help="0: a free port")
    ap.add_argument("--kwargs", default="{}", help="JSON constructor options every session starts from")
    args = ap.parse_args(argv)
    env_server = EnvServer(args.env, json.loads(args.kwargs))
    httpd = ThreadingHTTPServer((args.host, args.port), make_handler(env_server))
    httpd.daemon_threads = True
    host, port = httpd.server_address[:2]
    print(f"serving {args.env} on http://{host}:{port}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


if __name__ == "__main__":
    sys.exit(main())
