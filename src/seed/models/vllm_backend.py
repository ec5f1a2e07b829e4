"""vLLM generation backend (GPU): the `generate` / `logprobs` / `load_weights` surface of HFBackend.

Import-guarded: seed installs and tests without vLLM; `generation.backend: vllm` builds this inside generation
workers only. The engine runs in the worker's process (V1 multiprocessing off) so new weights can be loaded
in place after every update. Token ids go in and come out: nothing is re-tokenized, so student, teacher and
trainer see the same tokens. Sampled-token log-probs are vLLM's raw (temperature-1) log-probs, as HFBackend's.
"""

from __future__ import annotations

import os

from seed.models.backend import Generation, Sampling


def _require_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(
            "generation.backend = 'vllm' needs vLLM on a GPU machine: pip install vllm "
            "(match its torch version); allowed without it: hf"
        ) from exc
    return vllm


class VLLMBackend:
    def __init__(
        self,
        model_path: str,
        tokenizer,
        seed: int = 0,
        gpu_memory_utilization: float = 0.3,
        max_model_len: int = 4096,
        dtype: str = "bfloat16",
    ):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        vllm = _require_vllm()
        from seed.models.load import resolve_model_path

        self.vllm, self.tokenizer = vllm, tokenizer
        self.llm = vllm.LLM(
            model=str(resolve_model_path(model_path)),
            seed=seed,
            dtype=dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            enable_prefix_caching=True,
        )

    def generate(
        self, prompts: list[list[int]], sampling: Sampling, batch_size: int = 64, images: list[list] | None = None
    ) -> list[Generation]:
        params = self.vllm.SamplingParams(
            temperature=0.0 if sampling.greedy else sampling.temperature,
            max_tokens=sampling.max_new_tokens,
            stop=list(sampling.stop) or None,
            logprobs=0,
            include_stop_str_in_output=True,
        )
        outs = self.llm.generate(_inputs(prompts, images), params, use_tqdm=False)
        gens = []
        for out in outs:
            o = out.outputs[0]
            ids = [t for t in o.token_ids if sampling.keep_eos or t != self.tokenizer.eos_token_id]
            logps = [step[t].logprob for t, step in zip(o.token_ids, o.logprobs or [])][: len(ids)]
            gens.append(
                Generation(ids, logps, self.tokenizer.decode(ids, skip_special_tokens=True), o.finish_reason == "stop")
            )
        return gens

    def logprobs(
        self,
        prompts: list[list[int]],
        responses: list[list[int]],
        token_budget: int = 8192,
        images: list[list] | None = None,
    ):
        """Per-token log-probs of each response after its prompt (prefix caching shares repeated prompts)."""
        params = self.vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
        outs = self.llm.generate(_inputs([p + r for p, r in zip(prompts, responses)], images), params, use_tqdm=False)
        result = []
        for r, out in zip(responses, outs):
            table = out.prompt_logprobs  # one dict per position (None for the first)
            start = len(out.prompt_token_ids) - len(r)  # after vLLM expanded the image placeholders, if any
            result.append([table[start + k][tok].logprob for k, tok in enumerate(r)])
        return result

    def load_weights(self, state_dict: dict) -> None:
        """New trainer weights into the running engine (HF parameter names; vLLM maps and fuses them)."""
        items = list(state_dict.items())
        self.llm.apply_model(lambda model: model.load_weights(iter(items)))
        self.llm.reset_prefix_cache()  # cached K/V were computed with the old weights


def _inputs(token_lists: list[list[int]], images: list[list] | None) -> list[dict]:
    """vLLM token prompts; a row with images passes them as `multi_modal_data` (vLLM expands each placeholder)."""
    images = images if images is not None else [[] for _ in token_lists]
    return [
        {"prompt_token_ids": ids, **({"multi_modal_data": {"image": list(row)}} if row else {})}
        for ids, row in zip(token_lists, images)
    ]
