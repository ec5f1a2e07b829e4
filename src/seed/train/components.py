"""Build the pieces a run needs from its config: tokenizer, policy backend, reference model, collectors."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from seed.config import Config
from seed.dist.env_pool import make_env_pool
from seed.envs import make
from seed.envs.base import action_tags, argument_choices
from seed.models import HFBackend, Sampling, load_image_processor, load_model, load_tokenizer
from seed.models.backend import GenerationBackend
from seed.models.checkpointing import enable_activation_checkpointing
from seed.models.weights import allocate_weights, free_weights, frozen_copy
from seed.rollout.collector import Collector, RolloutSettings
from seed.storage import load_verified


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass
class Components:
    cfg: Config
    tokenizer: object
    policy: HFBackend
    reference: HFBackend | None
    # under FSDP, rank 0's full copy of the sharded policy: it rolls out and scores (refreshed after every update)
    replica: HFBackend | None = None
    remote: GenerationBackend | None = None  # generation workers (RemoteBackend), built on first use where configured
    wants_reference: bool = False  # a KL reference is due; built by `build_reference` once the start point exists

    def build_reference(self) -> HFBackend:
        """The KL reference backend on a frozen copy of the policy's current weights (the caller loads the start
        point into it when that differs)."""
        if self.reference is None:
            policy = self.policy
            dtype = policy.amp_dtype if policy.amp_dtype is not None and policy.device.type == "cpu" else None
            model = frozen_copy(policy.model, dtype)  # bf16-resident for scoring only: no per-pass casts
            self.reference = policy.on(model)
        return self.reference

    @property
    def reference_path(self) -> Path:
        return Path(self.cfg.run_dir) / "reference.pt"

    def scoring_reference(self) -> HFBackend | None:
        """The KL reference ready to score: weights `release_reference` freed are read back from reference.pt."""
        ref = self.reference
        if ref is not None and allocate_weights(ref.model, ref.device):
            ref.model.load_state_dict(load_verified(self.reference_path)["model"])
        return ref

    def release_reference(self) -> None:
        """Free the reference's weights until its next use, where `model.offload_reference` is on and reference.pt
        holds them (a run without start stages keeps the model as loaded in memory)."""
        if self.reference is not None and self.cfg.model.offload_reference and self.reference_path.exists():
            free_weights(self.reference.model)

    def rollout_backend(self) -> GenerationBackend:
        """Who decodes rollouts and analyses: the policy itself (under FSDP its replica), or generation workers
        holding copies of its weights (`generation.workers`, `generation.backend: vllm`)."""
        g = self.cfg.generation
        if self.remote is None:
            if g.workers == 0 and g.backend == "hf":
                return self.scoring_backend()
            self.remote = remote_generation(self.scoring_backend(), self.cfg)
        return self.remote

    def scoring_backend(self) -> HFBackend:
        """The trainer-side engine holding the rollout weights, for no-grad scores that are compared with the
        student's (teacher re-scores): generation workers (vLLM) would add an engine offset to the shift."""
        return self.replica or self.policy

    @property
    def sampling_generator(self) -> torch.Generator:
        """The random state rollouts sample from in this process (saved in checkpoints, so a resume samples on)."""
        return self.scoring_backend().generator

    def env_factory(self, split: str):
        """A picklable zero-argument constructor of this run's env on `split`."""
        env = self.cfg.env
        return functools.partial(make, env.name, split=split, **env.kwargs)

    def oracle_env_factory(self, split: str):
        """The env the oracle teacher replays episodes on: this run's, writing its observations in words where it
        can show frames instead (`render`), since the oracle's rules name situations in words."""
        env = self.cfg.env
        kwargs = dict(env.kwargs)
        if "render" in argument_choices(env.name):
            kwargs["render"] = "text"
        return functools.partial(make, env.name, split=split, **kwargs)

    def collector(self, split: str) -> Collector:
        env = self.cfg.env
        factory = self.env_factory(split)
        r = self.cfg.rollout
        settings = RolloutSettings(
            max_steps=env.max_steps,
            history_length=env.history_length,
            invalid_penalty=r.invalid_penalty,
            success_reward=r.success_reward,
            max_prompt_tokens=r.max_prompt_tokens,
            generation_batch_size=r.generation_batch_size,
            validity=r.validity,
        )
        pool = make_env_pool(factory, env.workers, env.step_timeout, self.cfg.dist.ray_address or None)
        return Collector(factory, env.name, self.tokenizer, settings, pool=pool)

    def rollout_sampling(self, temperature: float | None = None) -> Sampling:
        """Responses end with the end-of-turn token, generated and trained (official), or at the end of the
        answer block, `</action>` (`rollout.stop_at_action`; an env's own tags: `</search>`, `</answer>`)."""
        r = self.cfg.rollout
        return Sampling(
            temperature=r.temperature if temperature is None else temperature,
            max_new_tokens=r.max_response_tokens,
            stop=tuple(f"</{tag}>" for tag in action_tags(self.cfg.env.name)) if r.stop_at_action else (),
            keep_eos=not r.stop_at_action,
        )

    def eval_sampling(self) -> Sampling:
        return self.rollout_sampling(self.cfg.eval.temperature)


def remote_generation(local, cfg: Config):
    """Generation workers serving `local`'s weights (pushed to them whenever they change)."""
    from seed.dist.generation import RemoteBackend

    g = cfg.generation
    return RemoteBackend(
        local,
        cfg.model,
        max(1, g.workers),
        seed=cfg.seed,
        ray_address=cfg.dist.ray_address or None,
        engine=g.backend,
        gpu_memory_utilization=g.gpu_memory_utilization,
        gpus_per_worker=g.gpus_per_worker,
        max_model_len=vllm_context_length(cfg),
    )


def vllm_context_length(cfg: Config) -> int:
    """`generation.max_model_len`, or what the longest request needs: a rollout step or an analysis."""
    r, d = cfg.rollout, cfg.distill
    return cfg.generation.max_model_len or max(
        r.max_prompt_tokens + r.max_response_tokens, d.analyzer_max_prompt_tokens + d.analyzer_max_new_tokens
    )


def build_components(cfg: Config, with_reference: bool = True) -> Components:
    seed_everything(cfg.seed)
    tok = load_tokenizer(cfg.model.name)
    model = load_model(cfg.model.name, tok, lora=cfg.model.lora, seed=cfg.seed)
    policy = HFBackend(
        model,
        tok,
        device=cfg.model.device,
        precision=cfg.model.precision,
        seed=cfg.seed,
        image_processor=load_image_processor(cfg.model.name),
    )
    components = Components(cfg, tok, policy, None, wants_reference=with_reference and cfg.algo.kl_coef > 0)
    if components.wants_reference and not (cfg.warmup.enabled or cfg.sft.enabled):
        components.build_reference()  # the model as loaded is the start point; start stages would change it
    if cfg.model.activation_checkpointing:
        enable_activation_checkpointing(model)
    return components
