"""Decoding on the HF backend: batched sampling with a KV cache.

Sequences that finish (EOS or a stop string) leave the decoding batch at once: their rows are dropped from the
KV cache, so no forward pass is spent on them. Repeated prompts and the prefix all prompts share are prefilled
once (`EngineOptions`); every setting samples the same tokens.
"""

from __future__ import annotations

import copy

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

from seed.models.batching import common_prefix_length, distinct_rows, length_buckets
from seed.models.kv_cache import cache_keyword, cache_of, merge_left_padded, reserve_decode_cache
from seed.models.options import EngineOptions, Generation, Sampling
from seed.models.precision import autocast_context
from seed.models.weights import low_precision_copy


class HFDecoder:
    """Sampling from a transformers causal LM: the decoding half of `HFBackend`."""

    def __init__(
        self,
        model,
        tokenizer,
        device: torch.device,
        amp_dtype: torch.dtype | None,
        generator: torch.Generator,
        options: EngineOptions,
    ):
        self.model, self.tokenizer, self.device, self.amp_dtype = model, tokenizer, device, amp_dtype
        self.generator, self.options = generator, options
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
            self._gen_model = low_precision_copy(self.model, self.amp_dtype)
            self._gen_version = version
        elif version != self._gen_version:
            with torch.no_grad():
                for dst, src in zip(self._gen_model.parameters(), params):
                    dst.copy_(src)
            self._gen_version = version
        return self._gen_model

    def release_copy(self) -> None:
        """Free the bf16 decoding copy while the model trains (training forwards run on the fp32 weights under
        autocast): its memory goes to activations and optimizer state, and the next decode rebuilds it."""
        self._gen_model = None

    def autocast(self):
        return autocast_context(self.device, self.amp_dtype)

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], sampling: Sampling, batch_size: int = 64) -> list[Generation]:
        out: list[Generation] = []
        for i in range(0, len(prompts), batch_size):
            out.extend(self._generate_batch(prompts[i : i + batch_size], sampling))
        return out

    def _generate_batch(self, prompts: list[list[int]], sampling: Sampling) -> list[Generation]:
        model, tok = self.generation_model(), self.tokenizer
        was_training = model.training
        model.eval()
        n = len(prompts)
        lengths = [len(p) for p in prompts]
        gen_ids: list[list[int]] = [[] for _ in range(n)]
        gen_logps: list[list[float]] = [[] for _ in range(n)]
        stopped = [False] * n
        eos = {tok.eos_token_id} | (
            {model.config.eos_token_id} if isinstance(model.config.eos_token_id, int) else set()
        )
        if self.options.prefill_padding is not None and _full_attention_only(model):
            alive, cache, logits, attn = self._shared_prefill(model, prompts, sampling.max_new_tokens)
        else:  # one left-padded prefill of every row
            alive = list(range(n))
            cache, logits = self._prefill(model, prompts)
            if self.options.reserve_kv:
                cache = reserve_decode_cache(cache, sampling.max_new_tokens)
            width = max(lengths)
            attn = torch.zeros((n, width), dtype=torch.long, device=self.device)
            for r in range(n):  # left padding
                attn[r, width - lengths[r] :] = 1
        next_pos = torch.tensor([lengths[r] for r in alive], device=self.device)
        cache_kw = cache_keyword(model)
        for _ in range(sampling.max_new_tokens):
            nxt, tok_logp = next_tokens(logits, sampling, self.generator)
            keep = []
            for b, row in enumerate(alive):
                if take_token(int(nxt[b]), float(tok_logp[b]), gen_ids[row], gen_logps[row], sampling, tok, eos):
                    keep.append(b)
                else:
                    stopped[row] = True
            if not keep:
                break
            if len(keep) < len(alive):  # compaction: finished rows leave the batch
                idx = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(idx)
                attn, nxt, next_pos = attn[idx], nxt[idx], next_pos[idx]
                alive = [alive[b] for b in keep]
            attn = torch.cat([attn, torch.ones((len(alive), 1), dtype=attn.dtype, device=self.device)], dim=1)
            with self.autocast():
                res = model(
                    input_ids=nxt[:, None],
                    attention_mask=attn,
                    position_ids=next_pos[:, None],
                    use_cache=True,
                    **{cache_kw: cache},
                )
            cache, logits = cache_of(res), res.logits[:, -1, :].float()
            next_pos = next_pos + 1
        if was_training:
            model.train()
        return [
            Generation(gen_ids[r], gen_logps[r], tok.decode(gen_ids[r], skip_special_tokens=True), stopped[r])
            for r in range(n)
        ]

    def _shared_prefill(self, model, prompts: list[list[int]], extra_tokens: int):
        """Prefill without repeated work, for a decode batch: identical prompts run once (a group's episodes start
        from the same state), the prefix every prompt shares (chat template, instructions) runs once, and each
        distinct prompt's remainder runs after it in a length bucket of its own (`prefill_padding`). The buckets'
        K/V are merged into one reserved decode cache, and rows of repeated prompts are copies of their first.

        Returns the original row of each cache row, the cache, each row's next-token logits and the attention
        mask over the cache: per row, [left padding][shared prefix][padding][remainder]."""
        if self.options.share_prefill:
            keys, of_row = distinct_rows([tuple(p) for p in prompts])
            uniq = [list(p) for p in keys]
            shared = common_prefix_length(uniq, min(len(p) for p in uniq) - 1) if len(uniq) > 1 else 0
        else:
            of_row, uniq, shared = list(range(len(prompts))), prompts, 0
        prefix = self._prefill(model, [uniq[0][:shared]])[0] if shared else None
        rest = [len(p) - shared for p in uniq]
        buckets = length_buckets(rest, self.options.prefill_padding)
        caches, logits = [], []
        for bucket in buckets:
            bucket_prefix = None
            if prefix is not None:  # each bucket extends its own copy of the prefix's K/V
                bucket_prefix = copy.deepcopy(prefix)
                bucket_prefix.batch_repeat_interleave(len(bucket))
            cache, last = self._prefill(model, [uniq[u][shared:] for u in bucket], bucket_prefix)
            caches.append(cache)
            logits.append(last)
        widths = [shared + max(rest[u] for u in bucket) for bucket in buckets]
        cache = merge_left_padded(caches, widths, extra_tokens)
        width = max(widths)
        order = [u for bucket in buckets for u in bucket]  # the distinct prompt of each cache row
        attn = torch.zeros((len(order), width), dtype=torch.long, device=self.device)
        row_width = [w for bucket, w in zip(buckets, widths) for _ in bucket]
        for j, u in enumerate(order):
            attn[j, width - row_width[j] : width - row_width[j] + shared] = 1
            attn[j, width - rest[u] :] = 1
        position = {u: j for j, u in enumerate(order)}
        alive = sorted(range(len(prompts)), key=lambda r: position[of_row[r]])
        rows = [position[of_row[r]] for r in alive]
        logits = torch.cat(logits)
        if len(rows) > len(order):  # repeated prompts: copy their rows
            index = torch.tensor(rows, device=self.device)
            cache.batch_select_indices(index)
            logits, attn = logits[index], attn[index]
        return alive, cache, logits, attn

    def _prefill(self, model, prompts: list[list[int]], prefix=None):
        """One forward over left-padded prompts, after `prefix` (a cache of tokens every row shares) if given;
        returns the KV cache and each row's next-token logits."""
        decoder = model.get_decoder()
        shared = prefix.get_seq_length() if prefix is not None else 0
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.tokenizer.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            input_ids[r, width - len(p) :] = torch.tensor(p)
            attn[r, width - len(p) :] = 1
        input_ids, attn = input_ids.to(self.device), attn.to(self.device)
        position_ids = shared + (attn.cumsum(-1) - 1).clamp_min(0)
        cache = {}
        if prefix is not None:
            attn = torch.cat([torch.ones((len(prompts), shared), dtype=attn.dtype, device=self.device), attn], dim=1)
            cache = {cache_keyword(decoder): prefix}
        with self.autocast():
            res = decoder(input_ids=input_ids, attention_mask=attn, position_ids=position_ids, use_cache=True, **cache)
            # the head sees a contiguous copy of the last positions: given the strided slice (what the model's own
            # `logits_to_keep=1` passes), a bf16 linear on CPU computes the logits of every prompt position
            logits = model.get_output_embeddings()(res.last_hidden_state[:, -1, :].contiguous())
        return cache_of(res), logits.float()


def next_tokens(
    logits: torch.Tensor, sampling: Sampling, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's next token (greedy, or drawn at the sampling temperature) and its temperature-1 log-prob."""
    if sampling.greedy or sampling.temperature <= 0:
        nxt = logits.argmax(-1)
    else:
        nxt = sample_tokens(logits, sampling.temperature, generator)
    return nxt, torch.log_softmax(logits, dim=-1).gather(-1, nxt[:, None]).squeeze(-1)


def take_token(
    token: int, logp: float, ids: list[int], logps: list[float], sampling: Sampling, tokenizer, eos: set[int]
) -> bool:
    """Append a row's new token (the end-of-turn token only with `keep_eos`); False once the row has ended (that
    token, or a stop string in its last tokens)."""
    if token in eos:
        if sampling.keep_eos:
            ids.append(token)
            logps.append(logp)
        return False
    ids.append(token)
    logps.append(logp)
    return not (sampling.stop and any(s in tokenizer.decode(ids[-8:]) for s in sampling.stop))


def sample_tokens(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> torch.Tensor:
    """One token per row from softmax(logits / temperature), by inverting the row's CDF at one uniform draw.

    The same distribution as `torch.multinomial`, which on CPU draws an exponential per vocabulary entry, a cost
    that grows with the vocabulary (benchmarks/sampler.py). The CDF is summed in float64,
    16 rows at a time, so that a block's CDF stays in cache; a zero-probability token is never drawn (its CDF step
    is empty)."""
    out = []
    for block in logits.split(16):
        cdf = torch.softmax(block.float() / temperature, dim=-1).double().cumsum(-1)
        u = torch.rand((block.shape[0], 1), generator=generator, dtype=torch.float64, device=block.device)
        out.append(torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp_max(block.shape[-1] - 1).squeeze(-1))
    return torch.cat(out)


def _full_attention_only(model) -> bool:
    """Whether every layer caches plain full-attention K/V, which buckets can be merged for (not sliding windows)."""
    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers)
