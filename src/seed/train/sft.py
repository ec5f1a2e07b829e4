"""The one SFT step of the format warm-up and the analyzer SFT: response-only NLL, a weighted token mean.

A loss term is the NLL of its demonstrations' response tokens summed and divided by their token count over the
whole optimizer batch (verl's SFT trainer divides per micro-batch; over the batch, the token budget that splits it
into micro-batches does not change the loss). A demonstration's key tokens (the action of an answer, the
analyzer's skill inside its JSON) count `key_weight` times, in the sum and in the count: in a ~20-token answer the
action is one token, and once the format is learnt a plain mean leaves it little of the gradient. The analyzer SFT
adds the replayed warm-up demonstrations as a second term (L_analysis + L_format), so that replay never dilutes
the analyzer's own gradient.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from seed.models.backend import TrainableBackend
from seed.models.batching import token_budget_batches
from seed.train.metrics import trim_heap
from seed.train.optim import guarded_step


class Demonstration(NamedTuple):
    prompt: list[int]
    response: list[int]
    key_span: tuple[int, int]  # [start, end) of the tokens that decide the answer in `response`
    images: tuple = ()  # the prompt's frames, one per image placeholder


class SFTTerm(NamedTuple):
    demonstrations: list[Demonstration]
    key_weight: float  # how many times a key token counts


def token_weights(mask: torch.Tensor, key_spans: list[tuple[int, int]], key_weights: list[float]) -> torch.Tensor:
    """The response mask with each row's key tokens weighted by its `key_weights` entry."""
    weights = mask.clone()
    for row, ((start, end), weight) in enumerate(zip(key_spans, key_weights)):
        weights[row, start:end] *= weight
    return weights


def demo_images(demos: list[Demonstration], rows) -> list[list] | None:
    """The frames of the demonstrations at `rows`, for a backend call; None where none has any (a text env)."""
    images = [list(demos[j].images) for j in rows]
    return images if any(images) else None


def weighted_tokens(demonstration: Demonstration, key_weight: float) -> float:
    """A demonstration's token count with its key tokens counted `key_weight` times (the term's normaliser)."""
    start, end = demonstration.key_span
    return len(demonstration.response) + (key_weight - 1) * (end - start)


def sft_backward(policy: TrainableBackend, terms: list[SFTTerm], token_budget: int) -> float:
    """Accumulates the gradient of the sum of the terms' weighted token means over token-budget micro-batches;
    returns the loss."""
    demos = [d for term in terms for d in term.demonstrations]
    term_of = [t for t, term in enumerate(terms) for _ in term.demonstrations]
    totals = [max(1.0, sum(weighted_tokens(d, term.key_weight) for d in term.demonstrations)) for term in terms]
    value = 0.0
    for micro in token_budget_batches([len(d.prompt) + len(d.response) for d in demos], token_budget):
        logp, mask, _ = policy.forward_logps(
            [demos[j].prompt for j in micro], [demos[j].response for j in micro], images=demo_images(demos, micro)
        )
        key_weights = [terms[term_of[j]].key_weight for j in micro]
        weights = token_weights(mask, [demos[j].key_span for j in micro], key_weights)
        per_row_nll = -(logp * weights).sum(-1)
        scale = torch.tensor([1.0 / totals[term_of[j]] for j in micro], device=per_row_nll.device)
        loss = (per_row_nll * scale).sum()
        trim_heap()  # the forward's freed temporaries go back to the OS before the backward allocates gradients
        loss.backward()
        value += loss.item()
    return value


def sft_step(
    policy: TrainableBackend,
    optimizer: torch.optim.Optimizer,
    params: list[torch.nn.Parameter],
    terms: list[SFTTerm],
    token_budget: int,
) -> tuple[float, bool]:
    """One optimizer step on the sum of the terms' losses (gradient norm clipped at 1; a non-finite loss skips
    the step); returns the loss and whether the step was taken."""
    optimizer.zero_grad(set_to_none=True)
    value = sft_backward(policy, terms, token_budget)
    return value, guarded_step(optimizer, params, 1.0, value)
