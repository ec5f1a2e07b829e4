"""The openai teacher against a local chat-completions server started by the test (loopback only)."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from seed.rollout.types import Episode, StepSample, StepState
from seed.skills import parse_analysis
from seed.skills.openai_teacher import OpenAITeacher


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
        task = body["messages"][0]["content"].split("Task: ")[1].split("\n")[0]
        content = "```json\n" + json.dumps({"episode_summary": "ok", "episode_skill":
                                            f"For {task} push the box straight at the target."}) + "\n```"
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
    return [Episode(f"e{i}", 0, i, f"task {i}", "sokoban", won=False,
                    steps=[StepSample(st, [1], [2], [0.0], "<action>up</action>", "up", True, 0.0)]) for i in range(n)]


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
    with pytest.raises(RuntimeError, match="failed after 2 attempts"):
        teacher.label(_episodes(1)[0])
