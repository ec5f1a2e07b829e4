"""Search-QA: the generated world, BM25 and a Search-R1 retrieval server on 127.0.0.1, the expert, the answer tags."""

import functools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from seed.agent import parse_action, render
from seed.envs import make
from seed.envs.search.data import exact_match, generated_world, normalize_answer, read_qa
from seed.envs.search.retrieval import BM25Retriever
from seed.rollout.collector import Collector, RolloutSettings
from seed.skills.teachers import OracleTeacher
from seed.types import StepState

TAGS = ("search", "answer")


def test_exact_match_normalises_as_search_r1():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"  # punctuation goes, as in SQuAD's script
    assert exact_match("an Apple", ["apple"]) and exact_match(" Paris. ", ("paris", "Lyon"))
    assert not exact_match("Paris France", ["Paris"])


def test_the_generated_world_splits_by_country_and_fact():
    splits, corpus = generated_world()
    assert {k: len(v) for k, v in splits.items()} == {"train": 160, "valid_seen": 40, "valid_unseen": 100}
    titles = {d["contents"].split("\n")[0].strip('"') for d in corpus}
    countries = {k: {t for q in v for t in titles if t in q.question} for k, v in splits.items()}
    assert countries["valid_seen"] <= countries["train"] and not countries["valid_unseen"] & countries["train"]
    assert not {q.question for q in splits["valid_seen"]} & {q.question for q in splits["train"]}
    assert len(corpus) == 300 and generated_world() == (splits, corpus)  # deterministic


def test_bm25_finds_every_generated_fact_in_the_top_three():
    splits, corpus = generated_world()
    retriever = BM25Retriever(corpus)
    items = [q for split in splits.values() for q in split]
    hits = retriever.search([q.question for q in items], 3)
    assert all(any(q.answers[0] in d["contents"] for d in docs) for q, docs in zip(items, hits))


@pytest.mark.parametrize("split", ["train", "valid_seen", "valid_unseen"])
def test_the_expert_wins_every_panel_question(split):
    env = make("search_qa", split)
    for seed in range(64):
        env.reset(seed)
        plan = env.expert_plan()
        obs, _, done, info = env.step(plan[0])
        assert plan[0].startswith("search[") and obs.text.startswith("<information>Doc 1(Title:")
        assert not done and env.expert_plan() == plan[1:]
        obs, reward, done, info = env.step(plan[1])
        assert done and obs.won and reward == 1.0


def test_answers_in_the_envs_tags_and_invalid_ones():
    assert parse_action("<think>x</think><search> capital  of Y </search>", [], "format", TAGS).action == (
        "search[capital of Y]"
    )
    assert not parse_action("<search>q</search>", [], "format", TAGS).valid  # no <think>
    assert not parse_action("<think>x</think><action>up</action>", [], "format", TAGS).valid
    env = make("search_qa", "train")
    env.reset(0)
    for bad in ("jump", "search[]", "answer[", "click[x]"):
        obs, _, done, info = env.step(bad)
        assert not info["valid"] and not done
    _, reward, done, info = env.step("answer[certainly not this]")
    assert done and info["valid"] and not info["won"] and reward == 0.0


class _SearchR1Server(BaseHTTPRequestHandler):
    retriever: BM25Retriever

    def log_message(self, *args):
        pass

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        docs = self.retriever.search(request["queries"], request["topk"])
        body = json.dumps({"result": [[{"document": d, "score": 1.0} for d in row] for row in docs]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_search_r1_retrieval_server_plugs_in():
    _SearchR1Server.retriever = BM25Retriever(generated_world()[1])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SearchR1Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        remote, local = make("search_qa", "valid_seen", retriever=url), make("search_qa", "valid_seen")
        for seed in range(5):
            remote.reset(seed), local.reset(seed)
            plan = local.expert_plan()
            assert remote.step(plan[0])[0].text == local.step(plan[0])[0].text
    finally:
        server.shutdown()


def test_a_users_dataset_file_and_corpus(tmp_path):
    (tmp_path / "qa.jsonl").write_text(
        json.dumps({"question": "Which moon is made of cheese?", "golden_answers": ["Luna Brie"]}) + "\n"
    )
    (tmp_path / "corpus.jsonl").write_text(
        json.dumps({"id": "1", "contents": '"Moons"\nLuna Brie is the moon made of cheese.'})
        + "\n"
        + json.dumps({"id": "2", "contents": '"Rocks"\nGranite is hard.'})
        + "\n"
    )
    assert read_qa(tmp_path / "qa.jsonl")[0].answers == ("Luna Brie",)
    env = make("search_qa", "train", dataset=str(tmp_path / "qa.jsonl"), corpus=str(tmp_path / "corpus.jsonl"))
    env.reset(0)
    assert "Luna Brie is the moon" in env.step("search[moon cheese]")[0].text.split("Doc 2")[0]
    assert env.step("answer[luna brie]")[0].won


def test_a_rollout_in_tags_the_oracle_and_the_prompt(tokenizer):
    class Scripted:
        def generate(self, prompts, sampling, batch_size=64, images=None):
            from seed.models import Generation

            text = scripted.pop(0)
            ids = tokenizer.encode(text, add_special_tokens=False)
            return [Generation(ids, [-0.5] * len(ids), text, True) for _ in prompts]

    env = make("search_qa", "train")
    env.reset(7)
    question, gold = env.item.question, env.item.answers[0]
    scripted = [f"<think>look it up</think><search>{question}</search>", f"<think>found</think><answer>{gold}</answer>"]
    factory = functools.partial(make, "search_qa", split="train")
    collector = Collector(factory, "search_qa", tokenizer, RolloutSettings(4, 4))
    (episode,) = collector.collect(Scripted(), [7], 1, sampling=None)
    collector.close()
    assert episode.won and [s.action for s in episode.steps] == [f"search[{question}]", f"answer[{gold}]"]
    label = json.loads(OracleTeacher(functools.partial(make, "search_qa", split="train")).label(episode))
    assert label["episode_skill"].startswith("What works:") and "search[" in label["episode_skill"]
    state = episode.steps[1].state
    student, teacher = render(state, tokenizer), render(state, tokenizer, skill=label["episode_skill"])
    text = tokenizer.decode(student)
    assert "<search> </search>" in text and "admissible actions" not in text  # free text: no admissible list
    assert "<information>Doc 1" in text  # the last search's passages are the current observation
    assert len(teacher) > len(student)
    assert StepState.after("search_qa", env.reset(7), [], 4, 0).admissible == []


def test_the_search_tiny_config_runs_the_whole_seed_pipeline(tmp_path):
    from seed.cli import main
    from seed.storage import read_jsonl

    args = ["run", "search_tiny", f"run_dir={tmp_path}", "train.updates=1", "eval.episodes=1", "label.tasks=1"]
    assert main([*args, "eval.splits=[valid_unseen]", "rollout.max_response_tokens=32"]) == 0
    labels = read_jsonl(tmp_path / "labels.jsonl")
    assert labels and all("Question: " in r["prompt"] for r in labels)
    first = read_jsonl(next((tmp_path / "episodes").glob("*.jsonl")))[0]["steps"][0]
    assert first["state"]["admissible"] == [] and first["state"]["env_name"] == "search_qa"
