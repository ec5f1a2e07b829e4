"""Models and the generation/scoring backend."""

from seed.models.backend import Generation, HFBackend, Sampling
from seed.models.batching import prompt_sharing_batches, token_budget_batches
from seed.models.load import (
    SMOLLM2,
    TINY,
    TINY_VL,
    load_image_processor,
    load_model,
    load_tokenizer,
    smollm2_folder,
    trainable_parameters,
)
from seed.models.precision import autocast_dtype

__all__ = [
    "Generation",
    "HFBackend",
    "Sampling",
    "prompt_sharing_batches",
    "token_budget_batches",
    "SMOLLM2",
    "TINY",
    "TINY_VL",
    "autocast_dtype",
    "load_image_processor",
    "load_model",
    "load_tokenizer",
    "smollm2_folder",
    "trainable_parameters",
]
