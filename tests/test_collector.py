"""The collector under the official rules: which steps are invalid, what the env receives, left-truncated prompts.

The backend is scripted (fixed responses) so that each rule meets a response that tests it; the env and the
tokenizer are real."""

from seed.envs import make
from seed.models.backend import Generation
from seed.rollout.collector import Collector, RolloutSettings


class ScriptedBackend:
    def __init__(self, tokenizer, responses):
        self.tokenizer, self.responses, self.prompts = tokenizer, list(responses), []

    def generate(self, prompts, sampling, batch_size=64, images=None):
        self.prompts += prompts
        text = self.responses.pop(0)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return [Generation(ids, [-0.5] * len(ids), text, True) for _ in prompts]


RESPONSES = [
    "<think>no</think><action>dance</action>",  # well-formed, inadmissible
    "<action>up</action>",  # no think pair
    "<think>ok</think><action>up</action>",
]


def _collect(tokenizer, validity, max_prompt_tokens=2048):
    settings = RolloutSettings(max_steps=3, history_length=0, max_prompt_tokens=max_prompt_tokens, validity=validity)
    collector = Collector(lambda: make("sokoban"), "sokoban", tokenizer, settings)
    backend = ScriptedBackend(tokenizer, RESPONSES)
    episode = collector.collect(backend, [3], 1, sampling=None)[0]
    collector.close()
    return episode, backend


def test_format_rule_penalises_only_malformed_responses_and_sends_the_action(tokenizer):
    episode, _ = _collect(tokenizer, "format")
    assert [s.valid for s in episode.steps[:3]] == [True, False, True]
    assert [s.action for s in episode.steps[:3]] == ["dance", "up", "up"]  # "up" was sent although unpenalised
    assert [s.reward for s in episode.steps[:2]] == [0.0, -0.1]


def test_admissible_rule_also_penalises_inadmissible_actions(tokenizer):
    episode, _ = _collect(tokenizer, "admissible")
    assert [s.valid for s in episode.steps[:3]] == [False, False, True]


def test_long_prompts_are_left_truncated_and_counted(tokenizer):
    episode, backend = _collect(tokenizer, "format", max_prompt_tokens=40)
    assert all(len(p) == 40 for p in backend.prompts)
    assert all(s.truncated_prompt and len(s.prompt_ids) == 40 for s in episode.steps)
    full, _ = _collect(tokenizer, "format")
    assert full.steps[0].prompt_ids[-40:] == episode.steps[0].prompt_ids  # the end of the prompt is kept
    assert not any(s.truncated_prompt for s in full.steps)
