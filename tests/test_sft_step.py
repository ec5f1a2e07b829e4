"""The one SFT step: a weighted token mean per term over the whole batch, whatever the micro-batch split."""

import pytest
import torch

from seed.models import HFBackend, load_model
from seed.train.sft import Demonstration, SFTTerm, sft_backward, sft_step, token_weights, weighted_tokens


@pytest.fixture()
def policy(tokenizer):
    torch.manual_seed(0)
    return HFBackend(load_model("tiny-random", tokenizer), tokenizer, precision="fp32", seed=0)


def _demos():
    return [
        Demonstration([5, 6, 7, 8], [9, 10, 11], (1, 2)),
        Demonstration([5, 6, 12], [13, 14, 15, 16, 17], (0, 0)),
        Demonstration([5, 18, 19, 20, 21], [22, 23], (0, 2)),
    ]


def _grads(model):
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def test_weighted_tokens_counts_the_key_span_key_weight_times():
    demo = Demonstration([1], [2, 3, 4, 5], (1, 3))
    assert weighted_tokens(demo, 1.0) == 4
    assert weighted_tokens(demo, 4.0) == 4 + 3 * 2  # two key tokens count 4 times each


def test_token_weights_scales_only_each_rows_key_span():
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    weights = token_weights(mask, [(2, 3), (0, 1)], [4.0, 2.0])
    assert weights.tolist() == [[1.0, 1.0, 4.0, 0.0], [2.0, 1.0, 0.0, 0.0]]
    assert mask.tolist() == [[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]]  # the mask itself is left alone
    assert torch.equal(token_weights(mask, [(2, 3), (0, 1)], [1.0, 1.0]), mask)  # weight 1: the plain token mean


def test_each_term_is_its_weighted_token_mean_and_the_terms_add(policy):
    demos = _demos()
    labels, replay = SFTTerm(demos[:2], 3.0), SFTTerm(demos[2:], 2.0)
    with torch.no_grad():
        logp, mask, _ = policy.forward_logps([d.prompt for d in demos], [d.response for d in demos])
    nll = [-(logp[i, : len(d.response)]) for i, d in enumerate(demos)]  # by hand, token by token

    def weighted_sum(i, w):
        start, end = demos[i].key_span
        return float(nll[i].sum() + (w - 1) * nll[i][start:end].sum())

    l_labels = (weighted_sum(0, 3.0) + weighted_sum(1, 3.0)) / (3 + 2 * 1 + 5)
    l_replay = weighted_sum(2, 2.0) / (2 + 1 * 2)
    loss = sft_backward(policy, [labels, replay], token_budget=10_000)
    assert loss == pytest.approx(l_labels + l_replay, rel=1e-5)


def test_the_micro_batch_split_does_not_change_the_loss_or_the_gradient(policy):
    terms = [SFTTerm(_demos(), 2.0)]
    whole = sft_backward(policy, terms, token_budget=10_000)  # one micro-batch
    whole_grads = _grads(policy.model)
    policy.model.zero_grad(set_to_none=True)
    split = sft_backward(policy, terms, token_budget=9)  # one sequence per micro-batch
    assert split == pytest.approx(whole, rel=1e-5)
    for a, b in zip(_grads(policy.model), whole_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_a_step_moves_the_weights_and_a_non_finite_loss_skips_it(policy, monkeypatch):
    params = [p for p in policy.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3)
    before = [p.detach().clone() for p in params]
    loss, stepped = sft_step(policy, opt, params, [SFTTerm(_demos(), 1.0)], token_budget=10_000)
    assert stepped and loss > 0
    assert any(not torch.equal(p, b) for p, b in zip(params, before))
    assert all(p.grad is None for p in params)  # no gradient outlives its step
    moved = [p.detach().clone() for p in params]
    real = policy.forward_logps
    monkeypatch.setattr(
        policy, "forward_logps", lambda *a, **k: (lambda lp, m, e: (lp * float("nan"), m, e))(*real(*a, **k))
    )
    _, stepped = sft_step(policy, opt, params, [SFTTerm(_demos(), 1.0)], token_budget=10_000)
    assert not stepped
    assert all(torch.equal(p, m) for p, m in zip(params, moved))
