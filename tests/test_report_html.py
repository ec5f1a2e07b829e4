"""`seed report RUN_DIR --html` on a real run of the tiny config: the page's data reproduces what training saw, and
headless Chromium renders it (curves drawn, an episode's steps and coloured tokens shown, no console errors)."""

import json
import os
import shutil
from pathlib import Path

import pytest

from seed.agent import render_messages
from seed.cli import main
from seed.report.browser import Browser, find_chromium
from seed.report.page import episode_view, render_report, update_files, write_report
from seed.storage import read_jsonl
from seed.types import StepState

HOSTILE_SKILL = "</script><script>window.injected = 1</script><img src=x onerror='window.injected = 2'>"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Two SEED updates with the oracle's skills, evaluated before and after: every part of the page has data."""
    out = tmp_path_factory.mktemp("report") / "run"
    assert (
        main(
            [
                "run",
                "tiny",
                f"run_dir={out}",
                "distill.kind=seed",
                "distill.skill_source=teacher",
                "warmup.enabled=false",
                "eval.episodes=2",
            ]
        )
        == 0
    )
    return out


def test_update_files_are_numbered_like_the_metrics(run_dir):
    files = update_files(run_dir)
    assert sorted(files) == [1, 2]  # episodes/update_00000.jsonl is update 1
    assert files[1].name == "update_00000.jsonl"
    skill_updates = {r["update"] for r in read_jsonl(run_dir / "skills.jsonl")}
    assert skill_updates <= set(files)


def test_episode_view_recovers_the_exact_teacher_prompt_and_tokens(run_dir, tokenizer):
    episodes = read_jsonl(update_files(run_dir)[1])
    skilled = [e for e in episodes if e["skill"]]
    assert skilled, "the oracle explains every failure of the random model"
    raw, view = skilled[0], episode_view(tokenizer, skilled[0])
    for step, shown in zip(raw["steps"], view["steps"]):
        state = StepState(**{k: v for k, v in step["state"].items() if k != "images"})
        teacher = tokenizer.apply_chat_template(
            render_messages(state, raw["skill"]), add_generation_prompt=True, tokenize=False
        )
        rebuilt = shown["prompt"][: shown["skill_at"]] + shown["skill_block"] + shown["prompt"][shown["skill_at"] :]
        assert rebuilt == teacher and raw["skill"] in shown["skill_block"]
        assert len(shown["tokens"]) == len(step["response_ids"]) == len(shown["teacher_logp"])
        assert "".join(shown["tokens"]) == tokenizer.decode(step["response_ids"])
    assert view["won"] is False and view["skill"] == raw["skill"]


def test_model_text_cannot_end_the_script_element(run_dir, tokenizer, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    rows = read_jsonl(copy / "skills.jsonl")
    rows[0]["skill"] = HOSTILE_SKILL
    (copy / "skills.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = render_report(copy, tokenizer)
    assert "</script><script>window.injected" not in page
    assert page.count("<script") == page.count("</script>")


chromium = pytest.mark.skipif(
    find_chromium() is None,
    reason="no Chromium on PATH (scripts/setup.sh installs the "
    "Debian package `chromium` where it runs as root with apt-get)",
)


@chromium
def test_report_renders_in_a_real_browser(run_dir, tokenizer, tmp_path):
    rows = read_jsonl(run_dir / "skills.jsonl")
    rows[0]["skill"] = HOSTILE_SKILL  # model output shown on the page must stay text
    (run_dir / "skills.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = write_report(run_dir, tokenizer, tmp_path / "report.html")
    shots = Path(os.environ.get("SEED_REPORT_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with Browser() as browser:
        browser.open(page)
        # the curves: one SVG panel per metric family, a line through both updates
        titles = browser.evaluate("[...document.querySelectorAll('.chart')].map(c => c.dataset.title)")
        assert {"Rollout success", "Evaluation success (± SE)", "Δ mean (nats/token)", "RSS (MB)"} <= set(titles)
        points = browser.evaluate(
            "[...document.querySelectorAll('.chart')].find(c => c.dataset.title === "
            "'Rollout success').querySelector('polyline').getAttribute('points')"
        )
        assert len(points.split()) == 2
        assert browser.evaluate("document.querySelectorAll('#skills-table tr').length") == len(rows) + 1
        assert HOSTILE_SKILL in browser.evaluate("document.getElementById('skills-table').textContent")
        assert browser.evaluate("window.injected") is None
        browser.screenshot(shots / "report_curves.png")

        # select an episode as a user would: the Episodes tab, update 1, the first lost episode in the list
        browser.evaluate("document.querySelector('nav button[data-tab=episodes]').click()")
        browser.evaluate(
            "(() => { const s = document.getElementById('pick-outcome'); s.value = 'lost';"
            " s.dispatchEvent(new Event('change')); })()"
        )
        browser.wait_for("!!document.querySelector('#episode-list div[data-episode]')")
        episode_id = browser.evaluate("document.querySelector('#episode-list div[data-episode]').dataset.episode")
        browser.evaluate("document.querySelector('#episode-list div[data-episode]').click()")
        episode = next(e for e in read_jsonl(update_files(run_dir)[1]) if e["episode_id"] == episode_id)
        browser.wait_for("document.querySelectorAll('#episode-view .step').length > 0")
        assert browser.evaluate("document.querySelectorAll('#episode-view .step').length") == len(episode["steps"])
        tokens = browser.evaluate(
            "[...document.querySelectorAll('#episode-view .tok')].map(t => [t.textContent,"
            " t.dataset.delta, getComputedStyle(t).backgroundColor])"
        )
        assert len(tokens) == sum(len(s["response_ids"]) for s in episode["steps"])
        expected = [tlp - lp for s in episode["steps"] for tlp, lp in zip(s["teacher_logps"], s["rollout_logps"])]
        assert [float(d) for _, d, _ in tokens] == pytest.approx(expected, abs=2e-4)
        assert any(color != "rgba(0, 0, 0, 0)" for _, d, color in tokens if abs(float(d)) > 0.01)
        marked = browser.evaluate("document.querySelector('#episode-view mark.skill').textContent")
        assert episode["skill"] in marked
        browser.evaluate("document.querySelector('.teacher-prompt').open = true")
        browser.screenshot(shots / "report_episode.png")

        # a link from the skill stream opens its episode
        browser.open(page, f"update=1&episode={episode_id}")
        assert browser.evaluate("document.querySelector('#episode-list .sel').dataset.episode") == episode_id
        assert browser.errors == []
    for name in ("report_curves.png", "report_episode.png"):
        assert (shots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
