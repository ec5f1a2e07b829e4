"""Plain data of the generation/scoring engines: what to sample, what came out, and how the HF engine computes."""

from __future__ import annotations

from dataclasses import dataclass


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


@dataclass(frozen=True)
class EngineOptions:
    """How the HF backend computes, fixed at construction (`HFBackend.with_options` gives another). Every setting
    gives the same numbers; benchmarks/engine.py measures what each saves."""

    prefill_padding: float | None = 0.1  # decoding: prefill in length buckets with at most this padding; None: one
    reserve_kv: bool = True  # unbucketed decoding: into reserved K/V storage, not by concatenation (buckets always)
    share_prefill: bool = True  # bucketed decoding: repeated prompts and the common prompt prefix prefill once
    # scoring: prompts sharing at least this many tokens beyond the common prefix run them once. Off (None): on the
    # default batch it saved nothing and cost time in the update (benchmarks/engine.py, RESULTS.md)
    group_prefix_tokens: int | None = None
    plain_forward: bool = False  # scoring: one forward of the root module per call, as FSDP's collectives need
