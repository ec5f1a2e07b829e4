"""The distillation stage of an RL update: skills for the finished episodes, then teacher re-scoring.

It owns the analyzer (policy / teacher / library / privileged / sibling), the teacher weights (live / base / ema),
the skill stream (`skills.jsonl` in the run directory: one row per analysed episode, with its update index) and,
for the teacher-signal metrics, the expert's next move at every step (`StepSample.expert_action`).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from seed.models.weights import frozen_copy
from seed.skills.rescore import rescore
from seed.skills.sources import LibraryAnalyzer, PolicyAnalyzer, PrivilegedAnalyzer, SiblingAnalyzer, TeacherAnalyzer
from seed.skills.teachers import OracleTeacher, expert_moves
from seed.types import Episode, StepSample

if TYPE_CHECKING:  # annotations only
    from seed.train.components import Components

log = logging.getLogger(__name__)


def policy_analyzer(components: Components, step_skills: int = 0) -> PolicyAnalyzer:
    """SEED's analyzer as configured (`distill.analyzer_*`): the policy, decoding on the rollout engine."""
    d = components.cfg.distill
    return PolicyAnalyzer(
        components.rollout_backend(),
        components.tokenizer,
        d.analyzer_max_new_tokens,
        d.analyzer_batch_size,
        step_skills,
        max_prompt_tokens=d.analyzer_max_prompt_tokens,
        min_skill_words=d.min_skill_words,
        skill_first=d.skill_first,
    )


class DistillStage:
    def __init__(self, components):
        self.c = components
        cfg, d = components.cfg, components.cfg.distill
        self.path = Path(cfg.run_dir) / "skills.jsonl"
        if d.skill_source == "policy":
            self.analyzer = policy_analyzer(components, d.step_skills)
        elif d.skill_source == "teacher":
            self.analyzer = TeacherAnalyzer(
                OracleTeacher(components.oracle_env_factory("train"), d.step_skills),
                d.step_skills,
                min_skill_words=d.min_skill_words,
            )
        elif d.skill_source == "privileged":
            self.analyzer = PrivilegedAnalyzer(components.env_factory("train"))
        elif d.skill_source == "sibling":
            self.analyzer = SiblingAnalyzer()
        else:
            self.analyzer = LibraryAnalyzer(d.library_path)
        self.teacher_backend = self._teacher_backend()
        self.expert_env = components.env_factory("train")() if d.expert_signal else None  # its expert_plan

    def _teacher_backend(self):
        c, d = self.c, self.c.cfg.distill
        if d.teacher_weights == "live":  # SEED: the rollout weights, scored on the trainer's engine before the update
            return c.scoring_backend()
        if d.teacher_weights == "base" and c.reference is not None:  # the frozen start model, shared with KL
            return c.reference
        return c.policy.on(frozen_copy(c.policy.model))

    def run(self, update: int, episodes: list[Episode], samples: list[StepSample]) -> dict:
        """Skills for the finished episodes, then each skilled step's teacher log-probs onto its sample
        (`StepSample.teacher_logps`: the one place they live, saved with the episode)."""
        finished = [e for e in episodes if e.error is None and e.steps]
        t0 = time.perf_counter()
        results = self.analyzer.analyse(finished) if finished else []
        for e, (raw, analysis) in zip(finished, results):
            e.skill = analysis.skill
            e.step_skills = analysis.step_skills if analysis.skill else {}
            e.analysis = {"raw": raw, "summary": analysis.summary, "parsed": analysis.parsed, "error": analysis.error}
        t_analysis = time.perf_counter() - t0
        with self.path.open("a") as f:
            for e in finished:
                f.write(
                    json.dumps(
                        {
                            "update": update,
                            "episode_id": e.episode_id,
                            "outcome": "success" if e.won else "failure",
                            "task_type": e.task_type,
                            "skill": e.skill,
                            "step_skills": e.step_skills,
                            "analysis": e.analysis,
                        }
                    )
                    + "\n"
                )
        t1 = time.perf_counter()
        skills = {e.episode_id: e.skill for e in finished if e.skill}
        step_skills = {e.episode_id: e.step_skills for e in finished if e.skill and e.step_skills}
        if self.teacher_backend is self.c.reference:  # the frozen start model: its weights may have been freed
            self.c.scoring_reference()
        teacher = rescore(
            self.teacher_backend,
            self.c.tokenizer,
            samples,
            skills,
            self.c.cfg.algo.token_budget,
            step_skills,
            self.c.cfg.rollout.max_prompt_tokens,
        )
        for sample, logps in zip(samples, teacher):
            sample.teacher_logps = logps
        t_rescore = time.perf_counter() - t1
        t2 = time.perf_counter()
        self.mark_expert_moves(finished)
        t_expert = time.perf_counter() - t2
        with_skill = [e for e in finished if e.skill]
        return {
            "distill/parse_rate": sum(bool(e.analysis and e.analysis["parsed"]) for e in finished)
            / max(1, len(finished)),
            "distill/skill_rate": len(with_skill) / max(1, len(finished)),
            "distill/skill_words": sum(len(e.skill.split()) for e in with_skill) / max(1, len(with_skill)),
            "distill/step_skills": sum(len(e.step_skills) for e in with_skill) / max(1, len(with_skill)),
            "distill/analysis_steps_cut": self.analyzer.steps_cut,
            "time/analysis": t_analysis,
            "time/rescore": t_rescore,
            "time/expert_replay": t_expert,
        }

    def mark_expert_moves(self, episodes: list[Episode]) -> None:
        """`StepSample.expert_action` on every step of the episodes, from a replay next to the env's expert; an
        env fault leaves that episode's moves unknown (its steps drop out of the skill-lift metrics)."""
        if self.expert_env is None:
            return
        for e in episodes:
            try:
                moves = expert_moves(self.expert_env, e, self.c.cfg.rollout.validity)
            except Exception as exc:
                log.warning("expert replay of %s failed: %r", e.episode_id, exc)
                continue
            for step, move in zip(e.steps, moves):
                step.expert_action = move

    @torch.no_grad()
    def after_update(self) -> None:
        d = self.c.cfg.distill
        if d.teacher_weights != "ema":
            return
        for dst, src in zip(self.teacher_backend.model.parameters(), self.c.policy.model.parameters()):
            dst.mul_(d.ema_decay).add_(src.detach().to(dst.dtype), alpha=1 - d.ema_decay)
