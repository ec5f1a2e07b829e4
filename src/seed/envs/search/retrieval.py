"""Retrievers for Search-QA: BM25 over a corpus in this process (`bm25s`), or a Search-R1 retrieval server.

The server protocol is Search-R1's, so its standard e5 server plugs in unchanged:

    POST {url}/retrieve  {"queries": [str], "topk": k, "return_scores": true}
      -> {"result": [[{"document": {"id": str, "contents": str}, "score": float}, ...], ...]}

(entries may also be bare documents). Passages are shown as Search-R1 shows them: `Doc i(Title: t) text`.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Protocol


class Retriever(Protocol):
    def search(self, queries: list[str], topk: int) -> list[list[dict]]:
        """For each query, its `topk` documents ({"id", "contents"}), best first."""
        ...


class BM25Retriever:
    """Okapi BM25 (`bm25s`, English stop words) over the corpus, built once per corpus in a process."""

    def __init__(self, corpus: list[dict]):
        try:
            import bm25s
        except ImportError as exc:
            raise ImportError("Search-QA's built-in retriever needs bm25s: pip install bm25s") from exc
        logging.getLogger("bm25s").setLevel(logging.WARNING)  # its index building logs at debug level
        self.bm25s, self.corpus = bm25s, corpus
        self.index = bm25s.BM25()
        self.index.index(
            bm25s.tokenize([d["contents"] for d in corpus], stopwords="en", show_progress=False), show_progress=False
        )

    def search(self, queries: list[str], topk: int) -> list[list[dict]]:
        k = min(topk, len(self.corpus))
        tokens = self.bm25s.tokenize(queries, stopwords="en", show_progress=False)
        hits, _ = self.index.retrieve(tokens, k=k, show_progress=False)
        return [[self.corpus[int(i)] for i in row] for row in hits]


class HTTPRetriever:
    """A Search-R1 retrieval server (`retrieval_server.py`: e5 over wiki-18, or any server of that protocol)."""

    def __init__(self, url: str, timeout: float = 30.0):
        self.url, self.timeout = url.rstrip("/"), timeout

    def search(self, queries: list[str], topk: int) -> list[list[dict]]:
        body = json.dumps({"queries": queries, "topk": topk, "return_scores": True}).encode()
        request = urllib.request.Request(
            f"{self.url}/retrieve", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            result = json.loads(response.read())["result"]
        return [[entry.get("document", entry) for entry in row] for row in result]


def format_passages(documents: list[dict]) -> str:
    """Search-R1's rendering: `Doc 1(Title: t) text` per document, the title the first line in quotes."""
    lines = []
    for i, doc in enumerate(documents, 1):
        title, _, text = str(doc["contents"]).partition("\n")
        lines.append(f"Doc {i}(Title: {title.strip().strip(chr(34))}) {text.strip()}")
    return "\n".join(lines)
