"""The chunked LM head gives the plain head's log-probs, entropies and gradients without keeping any logits."""

import pytest
import torch

from seed.models.token_logps import _whole_head, head_token_logps


def _setup(seed: int = 0, tokens: int = 11, width: int = 16, vocab: int = 50):
    g = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(width, vocab, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(vocab, width, generator=g))
    hidden = torch.randn(tokens, width, generator=g, requires_grad=True)
    targets = torch.randint(0, vocab, (tokens,), generator=g)
    weights = torch.randn(tokens, 2, generator=g)  # a loss that uses both outputs with different signs per token
    return head, hidden, targets, weights


def _run(fn, head, hidden, targets, weights, autocast: bool):
    head.zero_grad(set_to_none=True)
    hidden.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        lp, ent = fn(head, hidden, targets, True)
    ((lp * weights[:, 0]).sum() + (ent * weights[:, 1]).sum()).backward()
    return lp.detach(), ent.detach(), hidden.grad.clone(), head.weight.grad.clone()


@pytest.mark.parametrize("autocast", [False, True])
def test_chunked_head_matches_the_whole_head_in_values_and_gradients(autocast):
    head, hidden, targets, weights = _setup()
    whole = _run(_whole_head, head, hidden, targets, weights, autocast)
    chunked = _run(lambda *a: head_token_logps(*a, chunk_rows=3), head, hidden, targets, weights, autocast)
    # fp32 agrees to rounding; under bf16 autocast the head's product is bf16 in both, and the weight gradient is
    # summed over chunks in bf16 rather than rounded once from one product
    tol = dict(rtol=1e-5, atol=1e-5) if not autocast else dict(rtol=2e-2, atol=2e-2)
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(b, a, **tol)
    assert chunked[0].dtype == torch.float32 and chunked[1].dtype == torch.float32


def test_log_probs_are_normalised_and_entropy_is_bounded():
    head, hidden, targets, _ = _setup(tokens=5)
    vocab = head.weight.shape[0]
    with torch.no_grad():
        all_lp = torch.stack(
            [head_token_logps(head, hidden, torch.full_like(targets, v), True)[0] for v in range(vocab)], -1
        )
        _, ent = head_token_logps(head, hidden, targets, True, chunk_rows=2)
    torch.testing.assert_close(all_lp.exp().sum(-1), torch.ones(5))
    torch.testing.assert_close(ent, -(all_lp.exp() * all_lp).sum(-1))
    assert (ent >= 0).all() and (ent <= torch.log(torch.tensor(float(vocab))) + 1e-5).all()


def test_a_head_with_a_bias_runs_whole():
    head = torch.nn.Linear(4, 7, bias=True)
    hidden, targets = torch.randn(3, 4), torch.tensor([0, 6, 2])
    lp, ent = head_token_logps(head, hidden, targets, False)
    assert ent is None
    torch.testing.assert_close(lp, torch.log_softmax(head(hidden), -1)[torch.arange(3), targets])
