"""Questions, answers and passages for Search-QA: the user's files (the Search-R1 formats), or a small world the
project generates itself, so that tests and a CPU smoke run need no download.

A QA file is JSON lines (or parquet, with pyarrow) with `question` and `golden_answers` (Search-R1), `answers` or
`answer`; a corpus is JSON lines (or parquet) with `id` and `contents` (`"Title"\\ntext`, Search-R1's wiki dump).
The generated world: fictional countries, each with five facts (one passage apiece), asked about one fact at a
time; `train` and `valid_seen` ask about the same countries (different facts), `valid_unseen` about others.
"""

from __future__ import annotations

import json
import random
import re
import string
from dataclasses import dataclass
from pathlib import Path

ATTRIBUTES = {  # fact -> (question, sentence); {c} the country, {v} the value
    "capital": ("What is the capital of {c}?", "The capital of {c} is {v}."),
    "currency": ("What is the currency of {c} called?", "The currency of {c} is the {v}."),
    "river": ("What is the longest river in {c}?", "The longest river in {c} is the {v}."),
    "founder": ("Who founded {c}?", "{c} was founded by {v}."),
    "animal": ("What is the national animal of {c}?", "The national animal of {c} is the {v}."),
}
_SYLLABLES = "ka lo mi ra ven tor sil bex qua dor fen lum zar pol nik tes vor mab rin sel".split()
_ANIMALS = "lynx heron ibex otter falcon bison crane marten viper tapir".split()


@dataclass(frozen=True)
class QAItem:
    question: str
    answers: tuple[str, ...]
    kind: str = ""  # the generated world's fact, or the dataset's own label


def normalize_answer(text: str) -> str:
    """Search-R1's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, answers: tuple[str, ...] | list[str]) -> bool:
    return normalize_answer(prediction) in {normalize_answer(a) for a in answers}


def _name(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(parts)).capitalize()


def generated_world(countries: int = 60, seed: int = 0) -> tuple[dict[str, list[QAItem]], list[dict]]:
    """The splits of the generated QA set and its corpus (one passage per fact)."""
    rng = random.Random(seed)
    names: set[str] = set()
    facts: list[tuple[str, dict[str, str]]] = []
    while len(facts) < countries:
        country = _name(rng, 3)
        values = {
            "capital": _name(rng, 2),
            "currency": _name(rng, 2).lower(),
            "river": _name(rng, 2),
            "founder": f"{_name(rng, 2)} {_name(rng, 2)}",
            "animal": rng.choice(_ANIMALS),
        }
        unique = {country, values["capital"], values["currency"], values["river"], values["founder"]}
        if len(unique) < 5 or names & unique:  # every name answers one question only (animals repeat)
            continue
        names |= unique
        facts.append((country, values))
    corpus = []
    for country, values in facts:
        for kind, value in values.items():
            sentence = ATTRIBUTES[kind][1].format(c=country, v=value)
            corpus.append({"id": str(len(corpus)), "contents": f'"{country}"\n{sentence}'})
    splits: dict[str, list[QAItem]] = {"train": [], "valid_seen": [], "valid_unseen": []}
    seen = int(countries * 2 / 3)
    kinds = list(ATTRIBUTES)
    for i, (country, values) in enumerate(facts):
        for k, kind in enumerate(kinds):
            item = QAItem(ATTRIBUTES[kind][0].format(c=country), (values[kind],), kind)
            if i >= seen:
                splits["valid_unseen"].append(item)
            else:
                splits["valid_seen" if k == i % len(kinds) else "train"].append(item)
    return splits, corpus


def read_rows(path: str | Path) -> list[dict]:
    """The rows of a JSON lines or parquet file."""
    path = Path(path).expanduser()
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError(f"{path}: parquet needs pyarrow (pip install pyarrow); or give JSON lines") from exc
        return pq.read_table(path).to_pylist()
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def read_qa(path: str | Path) -> list[QAItem]:
    """A QA file's items (Search-R1's `golden_answers`, or `answers` / `answer`)."""
    items = []
    for row in read_rows(path):
        answers = row.get("golden_answers", row.get("answers", row.get("answer")))
        answers = [answers] if isinstance(answers, str) else list(answers or [])
        if not row.get("question") or not answers:
            raise ValueError(f"{path}: a row without a question or answers: {str(row)[:200]}")
        items.append(QAItem(str(row["question"]), tuple(map(str, answers)), str(row.get("data_source", ""))))
    return items


def read_corpus(path: str | Path) -> list[dict]:
    rows = read_rows(path)
    for row in rows[:1]:
        if "contents" not in row:
            raise ValueError(f"{path}: corpus rows need `contents` (and `id`); found {sorted(row)}")
    return [{"id": str(row.get("id", i)), "contents": str(row["contents"])} for i, row in enumerate(rows)]
