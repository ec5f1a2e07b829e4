"""Per-token log-probs (and entropy) through the LM head, a few rows at a time.

The head's logits are [tokens, vocabulary]: for SmolLM2 49,152 floats per token, so a training micro-batch's fp32
logits, their log-softmax, the probabilities behind the entropy and the gradients of each are hundreds of MB
apiece. Only two numbers per token are needed (the target's log-prob and the entropy), so the head runs over
`CHUNK_ROWS` rows at a time and keeps no logits: backward recomputes each chunk's logits from the hidden states
(one extra head matmul) and forms the gradient of both outputs directly. The numbers are those of the plain
head: the matmul runs in the dtype autocast would give it, the softmax in fp32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK_ROWS = 128  # rows whose fp32 logits live at once (128 x 49,152 x 4 B = 25 MB for SmolLM2)


def head_token_logps(
    head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, with_entropy: bool, chunk_rows: int = CHUNK_ROWS
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(target) and, if asked, the entropy of each row of `hidden` [tokens, d] under `head`; fp32 [tokens].

    A head that is not a bias-free `nn.Linear` (a wrapped or biased head) runs whole, as the model would."""
    if type(head) is not torch.nn.Linear or head.bias is not None:
        return _whole_head(head, hidden, targets, with_entropy)
    dtype = (
        torch.get_autocast_dtype(hidden.device.type) if torch.is_autocast_enabled(hidden.device.type) else hidden.dtype
    )
    tok_lp, ent = _ChunkedHead.apply(hidden, head.weight, targets, with_entropy, chunk_rows, dtype)
    return tok_lp, (ent if with_entropy else None)


def _whole_head(head, hidden, targets, with_entropy):
    lp_all = F.log_softmax(head(hidden).float(), dim=-1)
    tok_lp = lp_all.gather(-1, targets[:, None]).squeeze(-1)
    return tok_lp, (-(lp_all.exp() * lp_all).sum(-1) if with_entropy else None)


def _chunk_log_softmax(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """`w`: the head's weight, already in the matmul dtype."""
    with torch.autocast(h.device.type, enabled=False):  # the cast is explicit: the same product autocast runs
        return F.log_softmax(F.linear(h.to(w.dtype), w).float(), dim=-1)


class _ChunkedHead(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, with_entropy: bool, chunk_rows: int, dtype: torch.dtype):
        n = hidden.shape[0]
        tok_lp = torch.empty(n, device=hidden.device)
        ent = torch.empty(n if with_entropy else 0, device=hidden.device)
        w = weight.to(dtype)  # cast once, not per chunk
        for s in range(0, n, chunk_rows):
            lp = _chunk_log_softmax(hidden[s : s + chunk_rows], w)
            tok_lp[s : s + chunk_rows] = lp.gather(-1, targets[s : s + chunk_rows, None]).squeeze(-1)
            if with_entropy:
                ent[s : s + chunk_rows] = -(lp.exp() * lp).sum(-1)
        ctx.save_for_backward(hidden, weight, targets)
        ctx.with_entropy, ctx.chunk_rows, ctx.dtype = with_entropy, chunk_rows, dtype
        return tok_lp, ent

    @staticmethod
    def backward(ctx, grad_lp, grad_ent):
        hidden, weight, targets = ctx.saved_tensors
        dtype, rows = ctx.dtype, ctx.chunk_rows
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        # the weight's gradient is summed in the matmul dtype, as the whole head's one product would give it
        grad_weight = torch.zeros_like(weight, dtype=dtype) if ctx.needs_input_grad[1] else None
        w = weight.to(dtype)
        for s in range(0, hidden.shape[0], rows):
            h = hidden[s : s + rows]
            lp = _chunk_log_softmax(h, w)
            p = lp.exp()
            # d log p_t / d logits = onehot(t) - p;  d H / d logits = -p * (log p + H)
            g_lp = grad_lp[s : s + rows, None]
            g_logits = -p * g_lp
            g_logits.scatter_add_(-1, targets[s : s + rows, None], g_lp)
            if ctx.with_entropy and grad_ent is not None:
                entropy = -(p * lp).sum(-1, keepdim=True)
                g_logits -= grad_ent[s : s + rows, None] * p * (lp + entropy)
            g_logits = g_logits.to(dtype)
            if grad_hidden is not None:
                grad_hidden[s : s + rows] = g_logits @ w
            if grad_weight is not None:
                grad_weight.addmm_(g_logits.T, h.to(dtype))
        if grad_weight is not None:
            grad_weight = grad_weight.to(weight.dtype)
        return grad_hidden, grad_weight, None, None, None, None
