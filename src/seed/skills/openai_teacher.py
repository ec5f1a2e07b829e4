"""An external analyzer behind any OpenAI-compatible chat-completions endpoint (a hosted model or a local vLLM).

Greedy decoding, retries with exponential backoff, a concurrency limit, and a content-addressed cache on disk so
a relabel costs nothing. Uses only the standard library.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from seed.rollout.types import Episode
from seed.skills.analyzer import analysis_prompt


class OpenAITeacher:
    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str = "", cache_dir: str | Path | None = None,
                 max_concurrency: int = 4, retries: int = 4, backoff: float = 1.0, timeout: float = 120.0,
                 max_tokens: int = 1024, step_skills: int = 0):
        if not base_url or not model:
            raise ValueError("the openai teacher needs label.openai.base_url and label.openai.model")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key or os.environ.get("OPENAI_API_KEY", "")
        self.cache = Path(cache_dir) if cache_dir else None
        if self.cache:
            self.cache.mkdir(parents=True, exist_ok=True)
        self.retries, self.backoff, self.timeout, self.max_tokens = retries, backoff, timeout, max_tokens
        self.max_concurrency, self.step_skills = max_concurrency, step_skills
        self._gate = threading.Semaphore(max_concurrency)
        self.requests_sent = 0

    def _key(self, prompt: str) -> str:
        return hashlib.sha256(f"{self.model}\n{prompt}".encode()).hexdigest()

    def complete(self, prompt: str) -> str:
        cached = self.cache / f"{self._key(prompt)}.json" if self.cache else None
        if cached is not None and cached.exists():
            return json.loads(cached.read_text())["content"]
        body = json.dumps({"model": self.model, "temperature": 0, "max_tokens": self.max_tokens,
                           "messages": [{"role": "user", "content": prompt}]}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                with self._gate:
                    self.requests_sent += 1
                    req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
                    with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                        content = json.loads(resp.read())["choices"][0]["message"]["content"]
                break
            except (urllib.error.URLError, TimeoutError, KeyError, json.JSONDecodeError) as exc:
                last = exc
                if isinstance(exc, urllib.error.HTTPError) and exc.code < 500 and exc.code != 429:
                    raise RuntimeError(f"teacher endpoint refused the request: HTTP {exc.code}") from exc
                time.sleep(self.backoff * 2 ** attempt)
        else:
            raise RuntimeError(f"teacher endpoint failed after {self.retries + 1} attempts: {last!r}")
        if cached is not None:
            tmp = cached.with_suffix(f".{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps({"content": content}))
            os.replace(tmp, cached)
        return content

    def label(self, episode: Episode) -> str:
        return self.complete(analysis_prompt(episode, step_skills=self.step_skills)[0])

    def label_many(self, episodes: list[Episode]) -> list[str]:
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(self.label, episodes))
