"""The backends' interfaces, and the HF backend that implements both on one model.

`GenerationBackend` is what decodes and scores without gradients (rollouts, analyses, teacher re-scores, the KL
reference): the HF backend, the vLLM backend, a generation worker and the Ray front of several workers.
`TrainableBackend` is what the trainer differentiates: the HF backend only. Training forwards always run on the
trainer's own model; where generation workers decode, they serve replicas of its weights.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Protocol, runtime_checkable

import torch

from seed.models.decoding import HFDecoder
from seed.models.options import EngineOptions, Generation, Sampling
from seed.models.precision import autocast_context, autocast_dtype
from seed.models.scoring import HFScorer
from seed.models.vision import VisionEngine, is_vision_model, vision_inputs
from seed.models.weights import store_frozen_linears_in

DEFAULT_OPTIONS = EngineOptions()  # frozen: one instance serves every backend built without options

__all__ = ["EngineOptions", "Generation", "GenerationBackend", "HFBackend", "Sampling", "TrainableBackend"]


@runtime_checkable
class GenerationBackend(Protocol):
    """Decoding and no-grad scoring over token ids (nothing is re-tokenized), on weights the trainer can replace.
    `images`: each prompt's images (PIL), one per image placeholder in its ids (`seed.models.vision`)."""

    def generate(
        self, prompts: list[list[int]], sampling: Sampling, batch_size: int = 64, images: list[list] | None = None
    ) -> list[Generation]: ...

    def logprobs(
        self,
        prompts: list[list[int]],
        responses: list[list[int]],
        token_budget: int = 8192,
        images: list[list] | None = None,
    ) -> list[list[float]]: ...

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None: ...


@runtime_checkable
class TrainableBackend(Protocol):
    """The model the optimizer steps, and per-token log-probs (and entropies) under the current grad mode as
    padded [batch, max_response] tensors with their mask."""

    model: torch.nn.Module

    def forward_logps(
        self,
        prompts: list[list[int]],
        responses: list[list[int]],
        with_entropy: bool = False,
        images: list[list] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]: ...


class HFBackend:
    """A transformers causal LM in this process: decoding (`HFDecoder`) and scoring (`HFScorer`) on one model,
    both `GenerationBackend` and `TrainableBackend`. A vision-language model (given its `image_processor`) decodes
    and scores through `VisionEngine` instead, with the images of each prompt."""

    def __init__(
        self,
        model,
        tokenizer,
        device: str = "cpu",
        precision: str = "auto",
        seed: int = 0,
        options: EngineOptions = DEFAULT_OPTIONS,
        image_processor=None,
    ):
        self.model, self.tokenizer, self.options = model, tokenizer, options
        self.precision, self.seed, self.image_processor = precision, seed, image_processor
        self.vision = None
        if is_vision_model(model):
            if image_processor is None:
                raise ValueError("a vision-language model needs its image processor (image_processor=...)")
            self.vision = vision_inputs(model, tokenizer, image_processor)
        self.device = torch.device(device)
        self.model.to(self.device)
        self.amp_dtype = autocast_dtype(self.device, precision)
        if self.amp_dtype is not None and self.device.type == "cpu":
            store_frozen_linears_in(self.model, self.amp_dtype)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self._build_engines()

    def _build_engines(self) -> None:
        self.decoder = HFDecoder(self.model, self.tokenizer, self.device, self.amp_dtype, self.generator, self.options)
        self.scorer = HFScorer(self.model, self.tokenizer, self.device, self.amp_dtype, self.options)
        self.vision_engine = None
        if self.vision is not None:
            self.vision_engine = VisionEngine(
                self.model, self.tokenizer, self.vision, self.device, self.amp_dtype, self.generator
            )

    def _engine_for(self, images: list[list] | None):
        """The vision engine for a vision-language model; the text engines otherwise, which see no images."""
        if self.vision_engine is not None:
            return self.vision_engine
        if images is not None and any(images):
            raise ValueError("this model is text-only: prompts with images need a vision-language model")
        return None

    def on(self, model) -> HFBackend:
        """A backend like this one (tokenizer, device, precision, image processor, a fresh sampling generator from
        the same seed; the default engine options, which a trainer's sharded model may have changed) on another
        model: a frozen copy for the KL reference, a teacher or a replica."""
        return HFBackend(
            model,
            self.tokenizer,
            device=str(self.device),
            precision=self.precision,
            seed=self.seed,
            image_processor=self.image_processor,
        )

    def with_options(self, **changes) -> HFBackend:
        """This backend (the same model, tokenizer and sampling generator) computing with other `EngineOptions`."""
        other = copy.copy(self)
        other.options = dataclasses.replace(self.options, **changes)
        other._build_engines()
        return other

    def autocast(self):
        return autocast_context(self.device, self.amp_dtype)

    # GenerationBackend
    def generate(
        self, prompts: list[list[int]], sampling: Sampling, batch_size: int = 64, images: list[list] | None = None
    ) -> list[Generation]:
        engine = self._engine_for(images)
        if engine is not None:
            return engine.generate(prompts, sampling, batch_size, images)
        return self.decoder.generate(prompts, sampling, batch_size)

    def logprobs(
        self,
        prompts: list[list[int]],
        responses: list[list[int]],
        token_budget: int = 8192,
        images: list[list] | None = None,
    ) -> list[list[float]]:
        engine = self._engine_for(images)
        if engine is not None:
            return engine.logprobs(prompts, responses, token_budget, images)
        return self.scorer.logprobs(prompts, responses, token_budget)

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state_dict)

    # TrainableBackend
    def forward_logps(
        self,
        prompts: list[list[int]],
        responses: list[list[int]],
        with_entropy: bool = False,
        images: list[list] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        engine = self._engine_for(images)
        if engine is not None:
            return engine.forward_logps(prompts, responses, with_entropy, images)
        return self.scorer.forward_logps(prompts, responses, with_entropy)

    def release_generation_copy(self) -> None:
        """Free the bf16 decoding copy while the model trains; the next decode rebuilds it."""
        self.decoder.release_copy()
