"""The Search-QA env: a question, `<search>query</search>` turns that return `<information>` passages, and an
`<answer>` that ends the episode, won on an exact match (Search-R1's normalisation). The paper's setting: 4 turns,
history 4, invalid penalty 0.01 (`configs/search_seed_qwen2.5-3b.yaml`).

    dataset   "generated" (the project's own world, `data.generated_world`), or a QA file or a folder holding
              `{split}.jsonl` / `{split}.parquet` (NQ, TriviaQA, PopQA, HotpotQA, 2Wiki, MuSiQue, Bamboogle in
              Search-R1's format)
    corpus    for BM25: "generated", or a corpus file (JSON lines or parquet, `id` + `contents`)
    retriever "bm25", or the URL of a Search-R1 retrieval server
"""

from __future__ import annotations

import functools
from pathlib import Path

from seed.envs.base import Obs, register
from seed.envs.search.data import QAItem, exact_match, generated_world, read_corpus, read_qa
from seed.envs.search.retrieval import BM25Retriever, HTTPRetriever, Retriever, format_passages

INSTRUCTION = (
    "Reason inside <think> </think> first every time you get new information. If you lack some knowledge, search "
    "for it with a query inside <search> </search>: the results come back between <information> and "
    "</information>. When you know the answer, give it inside <answer> </answer>, without explanation, e.g. "
    "<answer> Beijing </answer>."
)


@functools.lru_cache(maxsize=8)
def _questions(dataset: str, split: str) -> tuple[QAItem, ...]:
    if dataset == "generated":
        return tuple(generated_world()[0][split])
    path = Path(dataset).expanduser()
    if path.is_dir():
        files = [path / f"{split}.jsonl", path / f"{split}.parquet"]
        path = next((f for f in files if f.exists()), files[0])
    if not path.exists():
        raise FileNotFoundError(f"Search-QA dataset {path} not found (a QA file, or a folder with {split}.jsonl)")
    return tuple(read_qa(path))


@functools.lru_cache(maxsize=4)
def _bm25(corpus: str) -> BM25Retriever:
    """One index per corpus and process: a rollout opens one env per episode."""
    return BM25Retriever(generated_world()[1] if corpus == "generated" else read_corpus(corpus))


def make_retriever(retriever: str, corpus: str) -> Retriever:
    if retriever.startswith(("http://", "https://")):
        return HTTPRetriever(retriever)
    if retriever != "bm25":
        raise ValueError(f"retriever={retriever!r}; allowed: bm25, or a retrieval server's http(s) URL")
    return _bm25(corpus)


@register("search_qa", "Search-QA (Search-R1): <search> turns over a corpus, an exact-match <answer>")
class SearchQAEnv:
    name = "search_qa"
    intro = "You are a question-answering agent with a search engine."
    action_tags = ("search", "answer")
    answer_format = INSTRUCTION

    def __init__(
        self,
        split: str = "train",
        dataset: str = "generated",
        corpus: str = "generated",
        retriever: str = "bm25",
        topk: int = 3,
    ):
        self.split, self.topk = split, topk
        self.items = _questions(dataset, split)
        self.retriever = make_retriever(retriever, corpus)
        self.item: QAItem | None = None
        self.searched = False

    def reset(self, seed: int) -> Obs:
        self.item, self.searched = self.items[seed % len(self.items)], False
        return self._obs(f"Question: {self.item.question}")

    def _obs(self, text: str, won: bool = False) -> Obs:
        assert self.item is not None
        return Obs(text, f"answer the question: {self.item.question}", [], won, self.item.kind or "search_qa")

    def step(self, action: str) -> tuple[Obs, float, bool, dict]:
        if self.item is None:
            raise RuntimeError("call reset() before step()")
        tag, _, rest = action.strip().partition("[")
        text = rest[:-1].strip() if rest.endswith("]") else ""
        if tag == "search" and text:
            self.searched = True
            passages = format_passages(self.retriever.search([text], self.topk)[0])
            return self._obs(f"<information>{passages}</information>"), 0.0, False, {"valid": True}
        if tag == "answer" and text:
            won = exact_match(text, self.item.answers)
            return self._obs(f"Answered: {text}", won), float(won), True, {"valid": True, "won": won}
        return self._obs("No search or answer was given."), 0.0, False, {"valid": False}

    def expert_plan(self) -> list[str]:
        """Search the question, then answer (the gold answer: the expert knows it)."""
        if self.item is None:
            raise RuntimeError("call reset() before expert_plan()")
        answer = f"answer[{self.item.answers[0]}]"
        return [answer] if self.searched else [f"search[{self.item.question}]", answer]

    def close(self) -> None:
        self.item = None
