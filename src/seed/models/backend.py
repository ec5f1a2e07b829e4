"""The HF generation/scoring backend: batched sampling with a KV cache, and exact per-token log-probs.

Sequences that finish (EOS or a stop string) leave the decoding batch at once: their rows are dropped from the
KV cache, so no forward pass is spent on them.
"""
from __future__ import annotations

import contextlib
import copy
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from seed.models.load import autocast_dtype

# transformers 5.x renames `past_key_values` to `cache` with a FutureWarning; the old name works on 4.x and 5.x
warnings.filterwarnings("ignore", message=".*past_key_values.*deprecated", category=FutureWarning)


@dataclass
class Sampling:
    temperature: float = 1.0
    max_new_tokens: int = 64
    stop: tuple[str, ...] = ("</action>",)
    greedy: bool = False


@dataclass
class Generation:
    ids: list[int]
    logps: list[float]  # log-prob of each sampled token under the (temperature-1) policy
    text: str
    stopped: bool  # ended by EOS/stop string rather than by the token budget


class HFBackend:
    """Single-process backend over a transformers causal LM."""

    def __init__(self, model, tokenizer, device: str = "cpu", precision: str = "auto", seed: int = 0):
        self.model, self.tokenizer = model, tokenizer
        self.device = torch.device(device)
        self.model.to(self.device)
        self.amp_dtype = autocast_dtype(self.device, precision)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self._gen_model = None
        self._gen_version = -1

    def generation_model(self):
        """The model decoding runs on. Under bf16 autocast on CPU that is a bf16 copy of the weights, kept in
        sync by the parameters' in-place version counters (optimizer steps and load_state_dict bump them): it
        spares every decode step a cast of all weights, and can never be stale."""
        if self.amp_dtype is None or self.device.type != "cpu":
            return self.model
        params = list(self.model.parameters())
        version = sum(p._version for p in params)
        if self._gen_model is None:
            self._gen_model = copy.deepcopy(self.model).to(self.amp_dtype).eval()
            self._gen_version = version
        elif version != self._gen_version:
            with torch.no_grad():
                for dst, src in zip(self._gen_model.parameters(), params):
                    dst.copy_(src)
            self._gen_version = version
        return self._gen_model

    def autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], sampling: Sampling, batch_size: int = 64) -> list[Generation]:
        out: list[Generation] = []
        for i in range(0, len(prompts), batch_size):
            out.extend(self._generate_batch(prompts[i:i + batch_size], sampling))
        return out

    def _generate_batch(self, prompts: list[list[int]], sampling: Sampling) -> list[Generation]:
        model, tok = self.generation_model(), self.tokenizer
        was_training = model.training
        model.eval()
        n = len(prompts)
        width = max(len(p) for p in prompts)
        pad = tok.pad_token_id
        input_ids = torch.full((n, width), pad, dtype=torch.long)
        attn = torch.zeros((n, width), dtype=torch.long)
        for r, p in enumerate(prompts):  # left padding
            input_ids[r, width - len(p):] = torch.tensor(p)
            attn[r, width - len(p):] = 1
        input_ids, attn = input_ids.to(self.device), attn.to(self.device)
        position_ids = (attn.cumsum(-1) - 1).clamp_min(0)

        alive = list(range(n))  # original row of each live batch row
        gen_ids: list[list[int]] = [[] for _ in range(n)]
        gen_logps: list[list[float]] = [[] for _ in range(n)]
        stopped = [False] * n
        eos = {tok.eos_token_id} | ({model.config.eos_token_id} if isinstance(model.config.eos_token_id, int) else set())
        with self.autocast():
            res = model(input_ids=input_ids, attention_mask=attn, position_ids=position_ids, use_cache=True,
                        logits_to_keep=1)
        cache, logits = res.past_key_values, res.logits[:, -1, :].float()
        next_pos = position_ids[:, -1] + 1
        for _ in range(sampling.max_new_tokens):
            logp = torch.log_softmax(logits, dim=-1)
            if sampling.greedy or sampling.temperature <= 0:
                nxt = logits.argmax(-1)
            else:
                probs = torch.softmax(logits / sampling.temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
            tok_logp = logp.gather(-1, nxt[:, None]).squeeze(-1)
            keep = []
            for b, row in enumerate(alive):
                t = int(nxt[b])
                if t in eos:
                    stopped[row] = True
                    continue
                gen_ids[row].append(t)
                gen_logps[row].append(float(tok_logp[b]))
                tail = tok.decode(gen_ids[row][-8:])
                if any(s in tail for s in sampling.stop):
                    stopped[row] = True
                    continue
                keep.append(b)
            if not keep:
                break
            if len(keep) < len(alive):  # compaction: finished rows leave the batch
                idx = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(idx)
                attn, nxt, next_pos = attn[idx], nxt[idx], next_pos[idx]
                alive = [alive[b] for b in keep]
            attn = torch.cat([attn, torch.ones((len(alive), 1), dtype=attn.dtype, device=self.device)], dim=1)
            with self.autocast():
                res = model(input_ids=nxt[:, None], attention_mask=attn, position_ids=next_pos[:, None],
                            past_key_values=cache, use_cache=True)
            cache, logits = res.past_key_values, res.logits[:, -1, :].float()
            next_pos = next_pos + 1
        if was_training:
            model.train()
        return [Generation(gen_ids[r], gen_logps[r], tok.decode(gen_ids[r], skip_special_tokens=True), stopped[r])
                for r in range(n)]

    def forward_logps(self, prompts: list[list[int]], responses: list[list[int]], with_entropy: bool = False):
        """Per-token log-probs of `responses` given `prompts`, as a padded [batch, max_response] tensor (+ mask).

        Runs under the current grad mode; sequences are right-padded.
        """
        n = len(prompts)
        lens = [len(p) + len(r) for p, r in zip(prompts, responses)]
        width, rmax = max(lens), max(len(r) for r in responses)
        ids = torch.full((n, width), self.tokenizer.pad_token_id, dtype=torch.long)
        attn = torch.zeros((n, width), dtype=torch.long)
        for b, (p, r) in enumerate(zip(prompts, responses)):
            ids[b, :lens[b]] = torch.tensor(p + r)
            attn[b, :lens[b]] = 1
        ids, attn = ids.to(self.device), attn.to(self.device)
        rows = [b for b in range(n) if responses[b]]
        # lm_head only over response positions: the vocabulary projection of prompt tokens is never needed
        with self.autocast():
            hidden = self.model.get_decoder()(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state
            picked = torch.cat([hidden[b, len(prompts[b]) - 1:lens[b] - 1] for b in rows]) if rows else hidden[:0, 0]
            logits = self.model.get_output_embeddings()(picked)
        lp_all = F.log_softmax(logits.float(), dim=-1)
        targets = torch.tensor([t for b in rows for t in responses[b]], device=self.device, dtype=torch.long)
        tok_lp = lp_all.gather(-1, targets[:, None]).squeeze(-1)
        tok_ent = -(lp_all.exp() * lp_all).sum(-1) if with_entropy else None
        logps = torch.zeros((n, rmax), device=self.device)
        ent = torch.zeros((n, rmax), device=self.device) if with_entropy else None
        mask = torch.zeros((n, rmax), device=self.device)
        offset = 0
        for b in rows:
            k = len(responses[b])
            logps[b, :k] = tok_lp[offset:offset + k]
            if with_entropy:
                ent[b, :k] = tok_ent[offset:offset + k]
            mask[b, :k] = 1
            offset += k
        return logps, mask, ent

    @torch.no_grad()
    def logprobs(self, prompts: list[list[int]], responses: list[list[int]], token_budget: int = 8192) -> list[list[float]]:
        """No-grad per-token log-probs, batched by token budget (used for reference and teacher scoring)."""
        was_training = self.model.training
        self.model.eval()
        out: list[list[float]] = [None] * len(prompts)  # type: ignore[list-item]
        for chunk in token_budget_batches([len(p) + len(r) for p, r in zip(prompts, responses)], token_budget):
            lp, _, _ = self.forward_logps([prompts[i] for i in chunk], [responses[i] for i in chunk])
            for j, i in enumerate(chunk):
                out[i] = lp[j, :len(responses[i])].tolist()
        if was_training:
            self.model.train()
        return out


def token_budget_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Group indices (sorted by length) so that each group's padded size (n x max length) stays within budget."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        if cur and (len(cur) + 1) * max(lengths[i], lengths[cur[-1]]) > budget:
            groups.append(cur)
            cur = []
        cur.append(i)
    if cur:
        groups.append(cur)
    return groups
