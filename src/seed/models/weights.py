"""Whole-model weight operations the backends and the trainer share: low-precision frozen copies, freeing and
re-allocating a model's parameter storage, and storing frozen linears in the autocast dtype."""

from __future__ import annotations

import copy

import torch


def low_precision_copy(model, dtype: torch.dtype):
    """A frozen copy of `model` with every floating tensor in `dtype`, cast parameter by parameter: the copy never
    holds a second full-precision model, which `deepcopy(model).to(dtype)` does for a moment. Tied parameters stay
    tied (one cast each); frozen parameters already in `dtype` are shared with the copy, not duplicated."""
    memo = {
        id(p): p
        if p.dtype == dtype and not p.requires_grad
        else torch.nn.Parameter(p.detach().to(dtype), requires_grad=False)
        for p in model.parameters()
    }
    return copy.deepcopy(model, memo).to(dtype).eval()


def free_weights(model) -> None:
    """Drop every parameter's storage, keeping its shape and dtype on the meta device (buffers stay): the module
    keeps its structure and its tied parameters, and `allocate_weights` + `load_state_dict` fill it again."""
    _replace_parameters(model, lambda p: p.is_meta, "meta")


def allocate_weights(model, device: torch.device) -> bool:
    """Fresh (uninitialised) storage on `device` for parameters `free_weights` dropped; False if none was dropped."""
    return _replace_parameters(model, lambda p: not p.is_meta, device)


def _replace_parameters(model, keep, device) -> bool:
    """Each parameter that `keep` does not accept becomes an empty one of its shape on `device`; a parameter tied
    to several modules stays one parameter. True if any was replaced."""
    old = list(model.parameters())  # alive until the end: their ids stay unique
    new = {
        id(p): torch.nn.Parameter(torch.empty_like(p, device=device), requires_grad=p.requires_grad)
        for p in old
        if not keep(p)
    }
    for module in model.modules():
        for name, p in module._parameters.items():
            if p is not None and id(p) in new:
                module._parameters[name] = new[id(p)]
    return bool(new)


def store_frozen_linears_in(model, dtype: torch.dtype) -> None:
    """Store the weights of frozen linear layers (a LoRA model's base) in the autocast dtype.

    Autocast casts a linear's weight to its dtype on every call, and caches that cast only for weights that require
    grad: a frozen base weight was cast again in every forward and every checkpointed recompute. Stored in the
    autocast dtype it gives the same products, with no casts and half the memory. The input embedding stays as it is
    (its lookup is not autocast), and so does an LM head tied to it."""
    tied = id(model.get_input_embeddings().weight)
    for layer in model.modules():
        if (
            isinstance(layer, torch.nn.Linear)
            and id(layer.weight) != tied
            and not any(p.requires_grad for p in layer.parameters())
        ):
            layer.to(dtype)


def frozen_copy(model: torch.nn.Module, dtype: torch.dtype | None = None) -> torch.nn.Module:
    """A no-grad, eval-mode copy of `model` (in `dtype` where given) for scoring: references and fixed teachers."""
    frozen = low_precision_copy(model, dtype) if dtype is not None else copy.deepcopy(model).eval()
    for p in frozen.parameters():
        p.requires_grad_(False)
    for layer in frozen.modules():  # a copy of a checkpointed model: a frozen one never recomputes
        if getattr(layer, "gradient_checkpointing", False):
            layer.gradient_checkpointing = False
    return frozen
