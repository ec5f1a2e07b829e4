"""An external analyzer behind any OpenAI-compatible chat-completions endpoint (a hosted model or a local vLLM).

Greedy decoding, a concurrency limit, and a content-addressed cache on disk so a relabel costs nothing. Real servers
misbehave: connections drop, bodies arrive cut off or without choices, a slow server trickles bytes for ever. Every
attempt therefore has an end-to-end time limit (a watchdog closes the socket), transient failures (connection
errors, timeouts, 408/429/5xx, malformed bodies) are retried with exponential backoff inside a total deadline per
request, and a 4xx is final. A request that fails raises TeacherError for that episode only; the callers skip the
episode and count it. Only answers that parse as an analysis are cached. Uses only the standard library.
"""

from __future__ import annotations

import hashlib
import http.client
import ipaddress
import json
import logging
import os
import socket
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from seed.skills.analyzer import analysis_prompt, parse_analysis
from seed.types import Episode

log = logging.getLogger(__name__)


class TeacherError(RuntimeError):
    """One episode's label could not be obtained (after retries, or refused by the endpoint)."""


class _Transient(Exception):
    pass


def resolve_api_key(api_key: str = "", api_key_file: str = "", api_key_env: str = "OPENAI_API_KEY") -> str:
    """The key from the config value (never saved), else the key file, else the environment variable."""
    if api_key:
        return api_key
    if api_key_file:
        return Path(api_key_file).expanduser().read_text().strip()
    return os.environ.get(api_key_env, "") if api_key_env else ""


def is_local(host: str | None) -> bool:
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.endswith(".localhost")


class OpenAITeacher:
    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        cache_dir: str | Path | None = None,
        max_concurrency: int = 4,
        retries: int = 4,
        backoff: float = 1.0,
        timeout: float = 120.0,
        deadline: float = 600.0,
        max_tokens: int = 1024,
        step_skills: int = 0,
    ):
        if not base_url or not model:
            raise ValueError("the openai teacher needs label.openai.base_url and label.openai.model")
        self.url = urllib.parse.urlsplit(base_url.rstrip("/") + "/chat/completions")
        if self.url.scheme not in ("http", "https"):
            raise ValueError(f"label.openai.base_url must start with http:// or https://; got {base_url!r}")
        self.model, self.api_key = model, api_key
        if self.api_key and self.url.scheme == "http" and not is_local(self.url.hostname):
            log.warning("the API key will be sent unencrypted over plain http:// to %s", self.url.hostname)
            print(f"seed: warning: the API key will be sent unencrypted over plain http:// to {self.url.hostname}")
        self.cache = Path(cache_dir) if cache_dir else None
        if self.cache:
            self.cache.mkdir(parents=True, exist_ok=True)
        self.retries, self.backoff, self.timeout, self.deadline = retries, backoff, timeout, deadline
        self.max_tokens, self.max_concurrency, self.step_skills = max_tokens, max_concurrency, step_skills
        self._gate = threading.Semaphore(max_concurrency)
        self.requests_sent = 0
        self.failures = 0

    def _cache_file(self, prompt: str) -> Path | None:
        key = hashlib.sha256(f"{self.model}\n{prompt}".encode()).hexdigest()
        return self.cache / f"{key}.json" if self.cache else None

    def _cached(self, path: Path | None) -> str | None:
        if path is None or not path.exists():
            return None
        try:
            content = json.loads(path.read_text())["content"]
        except (OSError, ValueError, KeyError, TypeError):  # a damaged cache entry is asked again
            return None
        return content if isinstance(content, str) else None

    def complete(self, prompt: str) -> str:
        """The endpoint's answer to one prompt; TeacherError when it cannot be had within the deadline."""
        cached_file = self._cache_file(prompt)
        cached = self._cached(cached_file)
        if cached is not None:
            return cached
        body = json.dumps(
            {
                "model": self.model,
                "temperature": 0,
                "max_tokens": self.max_tokens,
                "messages": [{"role": "user", "content": prompt}],
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        end = time.monotonic() + self.deadline
        last = "no attempt within the deadline"
        attempts = 0
        for attempt in range(self.retries + 1):
            remaining = end - time.monotonic()
            if remaining <= 0:
                break
            attempts += 1
            try:
                with self._gate:
                    self.requests_sent += 1
                    content = _content(*self._post(body, headers, min(self.timeout, remaining)))
            except _Transient as exc:
                last = str(exc)
                delay = min(self.backoff * 2**attempt, max(0.0, end - time.monotonic()))
                if attempt < self.retries:
                    log.warning(
                        "teacher request failed (%s); retry %d/%d in %.1fs", last, attempt + 1, self.retries, delay
                    )
                    time.sleep(delay)
                continue
            if cached_file is not None and parse_analysis(content).parsed:
                tmp = cached_file.with_name(f".{cached_file.name}.{threading.get_ident()}.tmp")
                tmp.write_text(json.dumps({"content": content}))
                os.replace(tmp, cached_file)
            return content
        raise TeacherError(f"teacher endpoint failed after {attempts} attempts: {last}")

    def _post(self, body: bytes, headers: dict, timeout: float) -> tuple[int, bytes]:
        """(status, body) of one POST that ends within `timeout` seconds, whatever the server does."""
        u = self.url
        conn_cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(u.hostname, u.port, timeout=timeout)  # bounds the connect and each read
        sockets: list[socket.socket] = []  # the response takes the socket over from conn: keep our own handle
        expired = threading.Event()
        watchdog = threading.Timer(timeout, _abort, args=(sockets, expired))
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.connect()
            sockets.append(conn.sock)
            if expired.is_set():  # the connect itself took the whole time
                raise TimeoutError
            conn.request("POST", u.path + (f"?{u.query}" if u.query else ""), body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set():
                raise _Transient(f"no complete answer within {timeout:.1f}s") from None
            raise _Transient(f"{type(exc).__name__}: {exc}") from None
        finally:
            watchdog.cancel()
            conn.close()

    def label(self, episode: Episode) -> str:
        return self.complete(analysis_prompt(episode, step_skills=self.step_skills)[0])

    def label_many(self, episodes: list[Episode]) -> list[str | None]:
        """One answer per episode, None where the request failed (logged and counted in `failures`)."""

        def one(e: Episode) -> str | None:
            try:
                return self.label(e)
            except TeacherError as exc:
                self.failures += 1
                log.warning("episode %s not labelled: %s", e.episode_id, exc)
                return None

        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(one, episodes))


def _abort(sockets: list[socket.socket], expired: threading.Event) -> None:
    """The watchdog: shut the request's socket, so a blocked read returns at once."""
    expired.set()
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _content(status: int, raw: bytes) -> str:
    """The message text of a chat-completions answer; _Transient for a retryable failure, TeacherError for a 4xx."""
    if status in (408, 429) or status >= 500:
        raise _Transient(f"HTTP {status}")
    if status >= 400:
        raise TeacherError(f"teacher endpoint refused the request: HTTP {status}: {raw[:200]!r}")
    try:
        obj = json.loads(raw)
        content = obj["choices"][0]["message"]["content"]
    except (ValueError, RecursionError) as exc:
        raise _Transient(f"body is not JSON ({len(raw)} bytes: {exc})") from None
    except (KeyError, IndexError, TypeError):
        raise _Transient(f"body has no choices[0].message.content: {raw[:120]!r}") from None
    if not isinstance(content, str):
        raise _Transient(f"choices[0].message.content is {type(content).__name__}, not text")
    return content
