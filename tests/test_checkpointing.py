"""Activation checkpointing through the shared-prefix K/V path: the same log-probs and the same gradients as the
plain forward, each decoder layer really recomputed in backward, and no effect on no-grad scoring."""

import copy

import pytest
import torch

from seed.models import HFBackend, load_model
from seed.models.backend import EngineOptions
from seed.models.checkpointing import enable_activation_checkpointing


def _grads(backend: HFBackend, prompts, responses):
    backend.model.train()
    backend.model.zero_grad(set_to_none=True)
    logps, mask, _ = backend.forward_logps(prompts, responses)
    (-(logps * mask).sum() / mask.sum()).backward()
    return logps.detach(), {n: p.grad.clone() for n, p in backend.model.named_parameters() if p.grad is not None}


@pytest.fixture(scope="module")
def batch():
    shared = list(range(40, 70))  # the chat prefix every prompt shares
    group = list(range(200, 212))  # a longer prefix two prompts share (an episode's skill block)
    prompts = [
        shared + group + [300, 301, 302],
        shared + group + [310, 311],
        shared + [320, 321, 322, 323],
        shared + [330],
    ]
    responses = [[5, 6, 7], [8, 9], [10], [11, 12, 13, 14]]
    return prompts, responses


@pytest.mark.parametrize("group_prefix", [None, 30 + 12])
def test_checkpointed_forward_matches_the_plain_one(tokenizer, batch, group_prefix):
    model = load_model("tiny-random", tokenizer)
    options = EngineOptions(group_prefix_tokens=group_prefix)
    plain = HFBackend(model, tokenizer, precision="fp32", options=options)
    ckpt = HFBackend(copy.deepcopy(model), tokenizer, precision="fp32", options=options)
    assert enable_activation_checkpointing(ckpt.model) == model.config.num_hidden_layers
    runs = []
    for layer in ckpt.model.model.layers:
        layer.mlp.register_forward_hook(lambda *_: runs.append(1))  # inside the checkpointed region
    logps, grads = _grads(plain, *batch)
    assert not runs  # the hooks sit on the checkpointed model only
    ck_logps, ck_grads = _grads(ckpt, *batch)
    forward_runs = len(runs) // 2
    assert len(runs) == 2 * forward_runs > 0  # every layer run once more in backward
    assert torch.allclose(ck_logps, logps, atol=1e-6)
    assert grads.keys() == ck_grads.keys()
    for name, g in grads.items():
        assert torch.allclose(ck_grads[name], g, atol=1e-6, rtol=1e-5), name


def test_no_grad_scoring_is_unchanged(tokenizer, batch):
    model = load_model("tiny-random", tokenizer)
    plain = HFBackend(model, tokenizer, precision="fp32")
    before = plain.logprobs(*batch)
    enable_activation_checkpointing(model)
    runs = []
    for layer in model.model.layers:
        layer.mlp.register_forward_hook(lambda *_: runs.append(1))
    after = plain.logprobs(*batch)
    assert [x for row in after for x in row] == pytest.approx([x for row in before for x in row], abs=1e-6)
    per_forward = len(runs)
    assert per_forward > 0 and per_forward % model.config.num_hidden_layers == 0  # no recompute without grad
