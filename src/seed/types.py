"""The data every layer passes around: one step's state, one step as a training sample, one episode. Plain
dataclasses with no behaviour beyond (de)serialisation, so any layer may import them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class StepState:
    """Everything one step's prompt is made of. `render` turns it into token ids."""

    env_name: str
    task: str
    observation: str
    admissible: list[str]
    history: list[tuple[str, str]] = field(default_factory=list)  # last k (observation, action) pairs
    step_index: int = 0  # steps taken before this one
    images: list[Any] = field(default_factory=list)  # the current observation's frames (PIL); history stays text
    intro: str = ""  # the prompt's opening sentence where the observation names one (else the env's `intro`)

    @classmethod
    def after(
        cls, env_name: str, obs, history: list[tuple[str, str]], history_length: int, step_index: int
    ) -> StepState:
        """The state an agent sees at `obs`, with the last `history_length` (observation, action) pairs."""
        return cls(
            env_name,
            obs.task,
            obs.text,
            list(obs.admissible),
            history[-history_length:] if history_length else [],
            step_index,
            list(obs.images),
            obs.intro,
        )


@dataclass
class StepSample:
    """One env step as a training sample."""

    state: StepState
    prompt_ids: list[int]
    response_ids: list[int]
    rollout_logps: list[float]
    response_text: str
    action: str
    valid: bool
    reward: float  # success_reward on the step that wins, minus the invalid-action penalty (env rewards unused)
    episode_id: str = ""
    group_id: int = 0
    step_index: int = 0
    truncated_prompt: bool = False
    teacher_logps: list[float] | None = None  # the same tokens under the skill prompt (set when re-scored)
    advantage: float | None = None  # what the update trained this step with (set by compute_advantages)
    expert_action: str | None = None  # the env expert's next move in this state (set by the distillation stage)


@dataclass
class Episode:
    episode_id: str
    group_id: int
    task_seed: int
    task: str
    task_type: str
    steps: list[StepSample] = field(default_factory=list)
    won: bool = False
    score: float = 0.0  # outcome reward: success_reward * won - penalties
    skill: str | None = None
    step_skills: dict[int, str] = field(default_factory=dict)  # OPID-style, step index (0-based) -> sentence
    analysis: dict | None = None
    error: str | None = None

    @property
    def num_invalid(self) -> int:
        return sum(not s.valid for s in self.steps)

    def to_json(self) -> dict:
        d = asdict(self)
        for s, step in zip(d["steps"], self.steps):
            s.pop("prompt_ids")  # recoverable from the state; keeps episode files readable
            s["state"]["images"] = [f"<image {im.width}x{im.height}>" for im in step.state.images]  # sizes only
        return d
