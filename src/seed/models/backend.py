"""The HF generation/scoring backend: batched sampling with a KV cache, and exact per-token log-probs.

Sequences that finish (EOS or a stop string) leave the decoding batch at once: their rows are dropped from the
KV cache, so no forward pass is spent on them.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicCache, DynamicLayer

from seed.models.batching import (
    common_prefix_length,
    distinct_rows,
    length_buckets,
    prefix_stages,
    prompt_sharing_batches,
)
from seed.models.kv_cache import merge_left_padded, reserve_decode_cache
from seed.models.load import autocast_dtype
from seed.models.token_logps import head_token_logps


def _cache_keyword(model) -> str:
    """transformers 5.x renamed the KV-cache argument `past_key_values` to `cache`; speak whichever it takes."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return _cache_keyword_of(type(base))


@functools.cache
def _cache_keyword_of(model_class: type) -> str:  # one signature inspection per class, not per forward
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def _cache_of(out):
    return out.cache if "cache" in out else out.past_key_values


@dataclass
class Sampling:
    temperature: float = 1.0
    max_new_tokens: int = 64
    stop: tuple[str, ...] = ("</action>",)
    greedy: bool = False
    keep_eos: bool = False  # the end-of-turn token ends the response and is part of it (scored and trained)


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
        if self.amp_dtype is not None and self.device.type == "cpu":
            store_frozen_linears_in(self.model, self.amp_dtype)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self._gen_model = None
        self._gen_version = -1
        self.plain_forward = False  # True under FSDP: every scoring call is one forward of the root module
        # Decoding engine switches (all exact; benchmarks/engine.py measures them against the plain path):
        self.prefill_padding: float | None = 0.1  # prefill in length buckets with at most this padding; None: one
        self.reserve_kv = True  # unbucketed: decode into reserved K/V storage, not by concatenation (buckets always do)
        self.share_prefill = True  # with buckets: repeated prompts and the common prompt prefix prefill once
        # Scoring: prompts sharing at least this many tokens beyond the common prefix run them once. Off (None):
        # on the default batch it saved nothing in the re-score and cost 6% in the update (benchmarks/engine.py)
        self.group_prefix_tokens: int | None = None

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

    def release_generation_copy(self) -> None:
        """Free the bf16 decoding copy while the model trains (training forwards run on the fp32 weights under
        autocast): its memory goes to activations and optimizer state, and the next decode rebuilds it."""
        self._gen_model = None

    def autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

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
        if self.prefill_padding is not None and _full_attention_only(model):
            alive, cache, logits, attn = self._shared_prefill(model, prompts, sampling.max_new_tokens)
        else:  # one left-padded prefill of every row
            alive = list(range(n))
            cache, logits = self._prefill(model, prompts)
            if self.reserve_kv:
                cache = reserve_decode_cache(cache, sampling.max_new_tokens)
            width = max(lengths)
            attn = torch.zeros((n, width), dtype=torch.long, device=self.device)
            for r in range(n):  # left padding
                attn[r, width - lengths[r] :] = 1
        next_pos = torch.tensor([lengths[r] for r in alive], device=self.device)
        cache_kw = _cache_keyword(model)
        for _ in range(sampling.max_new_tokens):
            logp = torch.log_softmax(logits, dim=-1)
            if sampling.greedy or sampling.temperature <= 0:
                nxt = logits.argmax(-1)
            else:
                nxt = sample_tokens(logits, sampling.temperature, self.generator)
            tok_logp = logp.gather(-1, nxt[:, None]).squeeze(-1)
            keep = []
            for b, row in enumerate(alive):
                t = int(nxt[b])
                if t in eos:
                    stopped[row] = True
                    if sampling.keep_eos:
                        gen_ids[row].append(t)
                        gen_logps[row].append(float(tok_logp[b]))
                    continue
                gen_ids[row].append(t)
                gen_logps[row].append(float(tok_logp[b]))
                if sampling.stop and any(s in tok.decode(gen_ids[row][-8:]) for s in sampling.stop):
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
                res = model(
                    input_ids=nxt[:, None],
                    attention_mask=attn,
                    position_ids=next_pos[:, None],
                    use_cache=True,
                    **{cache_kw: cache},
                )
            cache, logits = _cache_of(res), res.logits[:, -1, :].float()
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
        if self.share_prefill:
            keys, of_row = distinct_rows([tuple(p) for p in prompts])
            uniq = [list(p) for p in keys]
            shared = common_prefix_length(uniq, min(len(p) for p in uniq) - 1) if len(uniq) > 1 else 0
        else:
            of_row, uniq, shared = list(range(len(prompts))), prompts, 0
        prefix = self._prefill(model, [uniq[0][:shared]])[0] if shared else None
        rest = [len(p) - shared for p in uniq]
        buckets = length_buckets(rest, self.prefill_padding)
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
            cache = {_cache_keyword(decoder): prefix}
        with self.autocast():
            res = decoder(input_ids=input_ids, attention_mask=attn, position_ids=position_ids, use_cache=True, **cache)
            # the head sees a contiguous copy of the last positions: given the strided slice (what the model's own
            # `logits_to_keep=1` passes), a bf16 linear on CPU computes the logits of every prompt position
            logits = model.get_output_embeddings()(res.last_hidden_state[:, -1, :].contiguous())
        return _cache_of(res), logits.float()

    def forward_logps(self, prompts: list[list[int]], responses: list[list[int]], with_entropy: bool = False):
        """Per-token log-probs of `responses` given `prompts`, as a padded [batch, max_response] tensor (+ mask).

        Runs under the current grad mode. Repeated prompt tokens are processed once per call: the prefix that all
        prompts share is run for one row, with `group_prefix_tokens` set a longer prefix that several prompts share
        (an episode's skill block under the teacher prompt) for one row per such group, each distinct
        prompt's remainder for one row, and the K/V of a segment are gathered for every row that continues it
        (gradients flow back through the gather and add up). The numbers are those of one forward over each full
        sequence; the work shrinks by the repeated prompt tokens, which matter on CPU: prompts are ~90% of the
        tokens, all share the chat/instruction prefix, and a group's episodes often revisit a state (about a
        third of the prompts in a default-config batch).
        """
        if self.plain_forward:
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
            for segments, parent in prefix_stages(uniq, shared, self.group_prefix_tokens):
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
            **({_cache_keyword(decoder): cache} if cache is not None else {}),
        )
        return out.last_hidden_state, _cache_of(out), attn, start + new_attn.sum(1)

    @torch.no_grad()
    def logprobs(
        self, prompts: list[list[int]], responses: list[list[int]], token_budget: int = 8192
    ) -> list[list[float]]:
        """No-grad per-token log-probs, batched by token budget (used for reference and teacher scoring).

        A (prompt, response) pair that occurs more than once is scored once: a group's rollouts often take the
        same action in the same state (on the default batch, 17 of 47 teacher pairs repeat another). One autocast
        region spans every micro-batch, so trainable fp32 weights are cast to bf16 once per call rather than once
        per forward (~50 ms each for SmolLM2-135M on 2 cores); the cast values are the same."""
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


def sample_tokens(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> torch.Tensor:
    """One token per row from softmax(logits / temperature), by inverting the row's CDF at one uniform draw.

    The same distribution as `torch.multinomial`, which on CPU draws an exponential per vocabulary entry: for 16
    rows of SmolLM2's 49k vocabulary that is ~20 ms a decode step against ~1 ms here. The CDF is summed in float64,
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
