"""Activation checkpointing that keeps the shared-prefix K/V path: each decoder layer keeps only its input for
backward and recomputes the rest there.

Training forwards run prompts through a K/V cache in stages (the shared prefix once, then each remainder, then the
responses), and a layer appends its keys and values to that cache. transformers' own checkpointing drops the cache
under checkpointing, because recomputing a layer would append a second time. Here the recompute sees the layer's
cache as it was when the layer first ran (the same tensors, still in the graph, so gradients reach earlier stages),
and the cache is put back afterwards: the recomputed values, and so the gradients, are those of the plain forward.
Forwards without gradients (generation, scoring) are not affected.
"""

from __future__ import annotations

import functools
import logging

from torch.utils.checkpoint import checkpoint
from transformers.modeling_layers import GradientCheckpointingLayer


class _UseCacheNotice(logging.Filter):
    """transformers announces that it sets a checkpointed layer's `use_cache` flag to False; the layers here keep
    their cache (the flag only matters to the model, above the layers), so the notice would mislead."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (
            message.startswith("Caching is incompatible with gradient checkpointing")
            and message.endswith("`use_cache=False`.")
        )


_USE_CACHE_NOTICE = _UseCacheNotice()


def enable_activation_checkpointing(model) -> int:
    """Checkpoint every decoder layer of `model` (a transformers model, LoRA-wrapped or not); the number of layers."""
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no checkpointable decoder layers")
    logging.getLogger(GradientCheckpointingLayer.__module__).addFilter(_USE_CACHE_NOTICE)
    for layer in layers:
        layer.gradient_checkpointing = True
        layer._can_checkpoint_with_cache = True  # the recompute below restores the cache it reads
        layer._gradient_checkpointing_func = checkpoint_with_cache
    return len(layers)


def _layer_state(cache, index: int) -> tuple:
    if index >= len(cache.layers):  # transformers adds a cache's layers on their first update
        return None, None, False
    layer = cache.layers[index]
    return getattr(layer, "keys", None), getattr(layer, "values", None), layer.is_initialized


def _set_layer_state(cache, index: int, state: tuple) -> None:
    layer = cache.layers[index]
    layer.keys, layer.values, layer.is_initialized = state


def checkpoint_with_cache(forward: functools.partial, *args):
    """`forward` (a decoder layer's forward with its keyword arguments bound) under non-reentrant checkpointing;
    a recompute runs against the cache state of the first run."""
    cache = forward.keywords.get("cache", forward.keywords.get("past_key_values"))
    if cache is None:
        return checkpoint(forward, *args, use_reentrant=False)
    index = forward.args[0].self_attn.layer_idx
    before = _layer_state(cache, index)
    runs = 0

    def run(*inputs):
        nonlocal runs
        runs += 1
        if runs == 1:
            return forward(*inputs)
        after = _layer_state(cache, index)
        _set_layer_state(cache, index, before)
        try:
            return forward(*inputs)
        finally:
            _set_layer_state(cache, index, after)

    return checkpoint(run, *args, use_reentrant=False)
