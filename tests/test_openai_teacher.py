"""The openai teacher against a local chat-completions server started by the test (loopback only)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from seed.skills import parse_analysis
from seed.skills.openai_teacher import OpenAITeacher, TeacherError
from seed.types import Episode, StepSample, StepState


class _Handler(BaseHTTPRequestHandler):
    calls = 0
    fail_first = 0

    def do_POST(self):  # noqa: N802
        type(self).calls += 1
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if type(self).calls <= type(self).fail_first:
            self.send_response(503)
            self.end_headers()
            return
        assert body["temperature"] == 0 and body["messages"][0]["role"] == "user"
        task = body["messages"][0]["content"].split("Task description: ")[1].split("\n")[0]
        content = (
            "```json\n"
            + json.dumps({"episode_summary": "ok", "episode_skill": f"For {task} push the box straight at the target."})
            + "\n```"
        )
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    _Handler.calls, _Handler.fail_first = 0, 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def _episodes(n):
    st = StepState("sokoban", "t", "obs", ["up"])
    return [
        Episode(
            f"e{i}",
            0,
            i,
            f"task {i}",
            "sokoban",
            won=False,
            steps=[StepSample(st, [1], [2], [0.0], "<action>up</action>", "up", True, 0.0)],
        )
        for i in range(n)
    ]


def test_labels_through_the_endpoint_and_the_cache_makes_relabel_free(server, tmp_path):
    teacher = OpenAITeacher(server, "test-model", cache_dir=tmp_path, max_concurrency=2, backoff=0.01)
    labels = teacher.label_many(_episodes(4))
    assert [parse_analysis(x).skill for x in labels][2] == "For task 2 push the box straight at the target."
    assert _Handler.calls == 4
    again = OpenAITeacher(server, "test-model", cache_dir=tmp_path).label_many(_episodes(4))
    assert again == labels and _Handler.calls == 4  # served from the cache


def test_retries_server_errors_with_backoff(server, tmp_path):
    _Handler.fail_first = 2
    teacher = OpenAITeacher(server, "m", cache_dir=tmp_path, retries=3, backoff=0.01)
    assert parse_analysis(teacher.label(_episodes(1)[0])).skill
    assert _Handler.calls == 3


def test_gives_up_with_a_clear_error(tmp_path):
    teacher = OpenAITeacher("http://127.0.0.1:9/v1", "m", retries=1, backoff=0.01, timeout=1)
    with pytest.raises(TeacherError, match="failed after 2 attempts"):
        teacher.label(_episodes(1)[0])


class _Misbehaving(BaseHTTPRequestHandler):
    """Plays one behaviour per request, in order, from `script` (the last one repeats); counts requests."""

    script: list = []
    calls = 0
    lock = threading.Lock()  # requests arrive on concurrent handler threads

    def do_POST(self):  # noqa: N802
        cls = type(self)
        with cls.lock:
            behaviour = cls.script[min(cls.calls, len(cls.script) - 1)]
            cls.calls += 1
            n = cls.calls
        self.rfile.read(int(self.headers["Content-Length"]))
        if callable(behaviour):
            behaviour = behaviour(n)
        if behaviour == "closed":
            return  # the connection closes with no answer
        if behaviour == "slow":  # one byte every 0.2 s, for as long as the client listens
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for _ in range(300):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass
            return
        status, body = {
            "cut": (200, None),
            "no_choices": (200, b'{"choices": []}'),
            "null_content": (200, b'{"choices": [{"message": {"content": null}}]}'),
            "list_body": (200, b"[1, 2]"),
            "500": (500, b"oops"),
            "400": (400, b'{"error": "bad request"}'),
            "not_json_answer": (200, _answer("I cannot answer in JSON.")),
            "ok": (200, _answer(json.dumps({"episode_summary": "s", "episode_skill": "Push the box up, then left."}))),
        }[behaviour]
        self.send_response(status)
        self.send_header("Content-Length", "1000" if body is None else str(len(body)))
        self.end_headers()
        self.wfile.write(b'{"choices": [{"mess' if body is None else body)

    def log_message(self, *args):
        pass


def _answer(content: str) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()


@pytest.fixture()
def misbehaving():
    _Misbehaving.calls = 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Misbehaving)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_transient_failures_are_retried_until_an_answer(misbehaving, tmp_path, caplog):
    _Misbehaving.script = ["closed", "cut", "no_choices", "null_content", "list_body", "500", "ok"]
    teacher = OpenAITeacher(misbehaving, "m", cache_dir=tmp_path, retries=6, backoff=0.01, timeout=2)
    assert parse_analysis(teacher.label(_episodes(1)[0])).skill == "Push the box up, then left."
    assert _Misbehaving.calls == 7 and caplog.text.count("retry") == 6  # each failure logged


def test_persistent_5xx_and_a_4xx_fail_the_episode_not_the_caller(misbehaving, tmp_path):
    _Misbehaving.script = ["500"] * 5 + ["ok"]
    teacher = OpenAITeacher(misbehaving, "m", cache_dir=tmp_path, retries=4, backoff=0.01)
    with pytest.raises(TeacherError, match="after 5 attempts: HTTP 500"):
        teacher.label(_episodes(1)[0])
    _Misbehaving.calls, _Misbehaving.script = 0, ["400"]
    assert teacher.label_many(_episodes(2)) == [None, None]
    assert _Misbehaving.calls == 2 and teacher.failures == 2  # a 400 is final: no retry


def test_a_trickling_server_cannot_hold_a_request_past_its_deadline(misbehaving):
    _Misbehaving.script = ["slow"]
    teacher = OpenAITeacher(misbehaving, "m", retries=10, backoff=0.01, timeout=1, deadline=2.5)
    t0 = time.perf_counter()
    with pytest.raises(TeacherError, match="within"):
        teacher.label(_episodes(1)[0])
    assert time.perf_counter() - t0 < 4.5 and _Misbehaving.calls <= 3


def test_only_answers_that_parse_are_cached(misbehaving, tmp_path):
    _Misbehaving.script = ["not_json_answer"]
    for _ in range(2):
        assert OpenAITeacher(misbehaving, "m", cache_dir=tmp_path).label(_episodes(1)[0]) == "I cannot answer in JSON."
    assert _Misbehaving.calls == 2 and not list(tmp_path.glob("*.json"))
    _Misbehaving.script = ["ok"]
    for _ in range(2):
        OpenAITeacher(misbehaving, "m", cache_dir=tmp_path).label(_episodes(1)[0])
    assert _Misbehaving.calls == 3 and len(list(tmp_path.glob("*.json"))) == 1


def test_the_label_stage_skips_failed_episodes_and_fails_only_above_the_share(misbehaving, tmp_path, capsys):
    from seed.cli import main

    args = [
        "label",
        "tiny",
        f"run_dir={tmp_path / 'run'}",
        "label.teacher=openai",
        f"label.openai.base_url={misbehaving}",
        "label.openai.model=m",
        "label.tasks=8",
        "label.group_size=2",
        "label.openai.backoff=0.01",
        "warmup.enabled=false",
    ]
    _Misbehaving.script = [lambda n: "400" if n % 4 == 0 else "ok"]  # a quarter of the requests refused
    assert main(args + ["label.max_failed_share=0.5"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "run" / "labels.jsonl").read_text().splitlines()]
    assert _Misbehaving.calls == 16 and len(rows) == 12
    _Misbehaving.calls, _Misbehaving.script = 0, ["400"]
    assert main(args[:2] + [f"run_dir={tmp_path / 'run2'}"] + args[3:]) == 1
    assert "labelling failed for 16 of 16 episodes" in capsys.readouterr().err
