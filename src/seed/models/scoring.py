"""Scoring on the HF backend: exact per-token log-probs (and entropies) of given responses, with or without
gradients. Repeated prompt tokens are processed once per call (`forward_logps`); the numbers are those of one
plain forward over each full sequence (`forward_logps_full`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from seed.models.batching import common_prefix_length, distinct_rows, prefix_stages, prompt_sharing_batches
from seed.models.kv_cache import cache_keyword, cache_of
from seed.models.options import EngineOptions
from seed.models.precision import autocast_context
from seed.models.token_logps import head_token_logps


class HFScorer:
    """Per-token log-probs under a transformers causal LM: the scoring half of `HFBackend`."""

    def __init__(self, model, tokenizer, device: torch.device, amp_dtype: torch.dtype | None, options: EngineOptions):
        self.model, self.tokenizer, self.device, self.amp_dtype = model, tokenizer, device, amp_dtype
        self.options = options

    def autocast(self):
        return autocast_context(self.device, self.amp_dtype)

    def forward_logps(self, prompts: list[list[int]], responses: list[list[int]], with_entropy: bool = False):
        """Per-token log-probs of `responses` given `prompts`, as a padded [batch, max_response] tensor (+ mask).

        Runs under the current grad mode. Repeated prompt tokens are processed once per call: the prefix that all
        prompts share is run for one row, with `group_prefix_tokens` set a longer prefix that several prompts share
        (an episode's skill block under the teacher prompt) for one row per such group, each distinct
        prompt's remainder for one row, and the K/V of a segment are gathered for every row that continues it
        (gradients flow back through the gather and add up). The numbers are those of one forward over each full
        sequence; the work shrinks by the repeated prompt tokens, which matter on CPU: prompts are most of the
        tokens, all share the chat/instruction prefix, and a group's episodes often revisit a state.
        """
        if self.options.plain_forward:
            return self.forward_logps_full(prompts, responses, with_entropy)
        n = len(prompts)
        rows = [b for b in range(n) if responses[b]]
        rmax = max((len(r) for r in responses), default=0)
        logps = torch.zeros((n, rmax), device=self.device)
        mask = torch.zeros((n, rmax), device=self.device)
        ent = torch.zeros((n, rmax), device=self.device) if with_entropy else None
        if not rows:
            return logps, mask, ent
        keys, of_row = distinct_rows([tuple(prompts[b]) for b in rows])
        uniq = [list(p) for p in keys]
        shared = common_prefix_length(uniq, limit=min(len(p) for p in uniq) - 1)  # each remainder keeps >= 1 token
        decoder = self.model.get_decoder()
        with self.autocast():
            cache, attn, lens, hidden = None, None, None, None
            for segments, parent in prefix_stages(uniq, shared, self.options.group_prefix_tokens):
                if cache is not None:  # every row continues a row of the previous stage
                    index = torch.tensor(parent, device=self.device)
                    cache.batch_select_indices(index)
                    attn, lens = attn[index], lens[index]
                hidden, cache, attn, lens = self._extend(decoder, segments, cache, attn, lens)
            tails = segments
            last_prompt = hidden[torch.arange(len(uniq)), torch.tensor([len(t) - 1 for t in tails])]
            # response token 0 is predicted from the last prompt position, token k from response position k-1
            first = last_prompt[of_row]
            rest = None
            if max(len(responses[b]) for b in rows) > 1:
                index = torch.tensor(of_row, device=self.device)
                cache.batch_select_indices(index)
                rest, _, _, _ = self._extend(
                    decoder, [responses[b][:-1] for b in rows], cache, attn[index], lens[index]
                )
            picked = torch.cat(
                [
                    torch.cat([first[j : j + 1]] + ([] if rest is None else [rest[j, : len(responses[b]) - 1]]))
                    for j, b in enumerate(rows)
                ]
            )
            targets = torch.tensor([t for b in rows for t in responses[b]], device=self.device, dtype=torch.long)
            tok_lp, tok_ent = head_token_logps(self.model.get_output_embeddings(), picked, targets, with_entropy)
        offset = 0
        for b in rows:
            k = len(responses[b])
            logps[b, :k] = tok_lp[offset : offset + k]
            if with_entropy:
                ent[b, :k] = tok_ent[offset : offset + k]
            mask[b, :k] = 1
            offset += k
        return logps, mask, ent

    def forward_logps_full(self, prompts: list[list[int]], responses: list[list[int]], with_entropy: bool = False):
        """`forward_logps` as one plain forward of the whole model over each full (prompt + response) sequence.

        The reference numbers for the shared-prompt path, and the path data-parallel training takes: every call
        is one forward of the root module whatever the rows are, so FSDP's collectives match across ranks.
        """
        n = len(prompts)
        rmax = max((len(r) for r in responses), default=0)
        seqs = [list(p) + list(r) for p, r in zip(prompts, responses)]
        width = max(len(q) for q in seqs)
        ids = torch.full((n, width), self.tokenizer.pad_token_id, dtype=torch.long)
        attn = torch.zeros((n, width), dtype=torch.long)
        for b, q in enumerate(seqs):
            ids[b, : len(q)] = torch.tensor(q, dtype=torch.long)
            attn[b, : len(q)] = 1
        ids, attn = ids.to(self.device), attn.to(self.device)
        with self.autocast():
            logits = self.model(input_ids=ids, attention_mask=attn).logits
        lp_all = F.log_softmax(logits.float(), dim=-1)
        logps = torch.zeros((n, rmax), device=self.device)
        mask = torch.zeros((n, rmax), device=self.device)
        ent = torch.zeros((n, rmax), device=self.device) if with_entropy else None
        for b, (p, r) in enumerate(zip(prompts, responses)):
            if not r:
                continue
            k, pos = len(r), torch.arange(len(p) - 1, len(p) - 1 + len(r), device=self.device)
            row = lp_all[b, pos]
            logps[b, :k] = row.gather(-1, torch.tensor(r, device=self.device)[:, None]).squeeze(-1)
            if with_entropy:
                ent[b, :k] = -(row.exp() * row).sum(-1)
            mask[b, :k] = 1
        return logps, mask, ent

    def _extend(self, decoder, segments: list[list[int]], cache, attn, lens):
        """Run one right-padded segment per row after the rows' cached K/V; returns its hidden states and the
        extended (cache, attention mask, true lengths). Positions continue each row's own length."""
        width = max(len(s) for s in segments)
        ids = torch.full((len(segments), width), self.tokenizer.pad_token_id, dtype=torch.long)
        new_attn = torch.zeros((len(segments), width), dtype=torch.long)
        for b, seg in enumerate(segments):
            ids[b, : len(seg)] = torch.tensor(seg, dtype=torch.long)
            new_attn[b, : len(seg)] = 1
        ids, new_attn = ids.to(self.device), new_attn.to(self.device)
        start = lens if lens is not None else torch.zeros(len(segments), dtype=torch.long, device=self.device)
        positions = start[:, None] + torch.arange(width, device=self.device)[None, :]
        attn = new_attn if attn is None else torch.cat([attn, new_attn], dim=1)
        out = decoder(
            input_ids=ids,
            attention_mask=attn,
            position_ids=positions,
            use_cache=True,
            **({cache_keyword(decoder): cache} if cache is not None else {}),
        )
        return out.last_hidden_state, cache_of(out), attn, start + new_attn.sum(1)

    @torch.no_grad()
    def logprobs(
        self, prompts: list[list[int]], responses: list[list[int]], token_budget: int = 8192
    ) -> list[list[float]]:
        """No-grad per-token log-probs, batched by token budget (used for reference and teacher scoring).

        A (prompt, response) pair that occurs more than once is scored once: a group's rollouts often take the
        same action in the same state. One autocast region spans every micro-batch, so trainable fp32 weights are
        cast to bf16 once per call rather than once per forward; the cast values are the same."""
        was_training = self.model.training
        self.model.eval()
        pairs, of_pair = distinct_rows([(tuple(p), tuple(r)) for p, r in zip(prompts, responses)])
        uniq_prompts = [list(p) for p, _ in pairs]
        uniq_responses = [list(r) for _, r in pairs]
        scored: list[list[float]] = [[] for _ in pairs]
        with self.autocast():
            for chunk in prompt_sharing_batches(uniq_prompts, uniq_responses, token_budget):
                lp, _, _ = self.forward_logps([uniq_prompts[i] for i in chunk], [uniq_responses[i] for i in chunk])
                for j, i in enumerate(chunk):
                    scored[i] = lp[j, : len(uniq_responses[i])].tolist()
        if was_training:
            self.model.train()
        return [list(scored[k]) for k in of_pair]
