"""Generation workers: Ray actors that each hold a replica of the policy and serve `generate` and `logprobs`.

`RemoteBackend` wraps the trainer's own backend. Decoding (rollouts, the analyzer) and no-grad scoring (teacher
re-scores) are split across the actors, in order; training forwards stay on the trainer's model. Before every
call it compares the trainer weights' in-place version counters (bumped by every optimizer step and
`load_state_dict`) with those it last pushed, and pushes a fresh copy (one `ray.put`, shared by all actors) when
they differ: the replicas can never serve stale weights, and a run pushes once per update.
"""

from __future__ import annotations

from seed.models.backend import Generation, Sampling


class GenerationWorker:
    """The body of one Ray generation actor: an HF (CPU/GPU) or vLLM (GPU) backend on its own model copy."""

    def __init__(
        self,
        model_name: str,
        device: str,
        precision: str,
        seed: int,
        lora: dict | None,
        engine: str = "hf",
        gpu_memory_utilization: float = 0.3,
        max_model_len: int = 4096,
    ):
        from seed.models import load_model, load_tokenizer

        self.tokenizer = load_tokenizer(model_name)
        if engine == "vllm":
            from seed.models.vllm_backend import VLLMBackend

            self.backend = VLLMBackend(
                model_name,
                self.tokenizer,
                seed=seed,
                gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len,
            )
        else:
            from seed.models import HFBackend, load_image_processor

            model = load_model(model_name, self.tokenizer, lora=lora, seed=seed)
            self.backend = HFBackend(
                model,
                self.tokenizer,
                device=device,
                precision=precision,
                seed=seed,
                image_processor=load_image_processor(model_name),
            )

    def load_weights(self, state_dict: dict) -> None:
        self.backend.load_weights(state_dict)

    def generate(
        self, prompts: list[list[int]], sampling: Sampling, batch_size: int = 64, images: list[list] | None = None
    ) -> list[Generation]:
        return self.backend.generate(prompts, sampling, batch_size=batch_size, images=images)

    def logprobs(
        self,
        prompts: list[list[int]],
        responses: list[list[int]],
        token_budget: int = 8192,
        images: list[list] | None = None,
    ) -> list[list[float]]:
        return self.backend.logprobs(prompts, responses, token_budget, images=images)


def _rows(images: list[list] | None, rows: range) -> list[list] | None:
    return None if images is None else [images[i] for i in rows]


def _split(n: int, parts: int) -> list[range]:
    """Contiguous, near-equal index ranges (empty ones dropped)."""
    size, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        stop = start + size + (1 if i < extra else 0)
        if stop > start:
            out.append(range(start, stop))
        start = stop
    return out


class RemoteBackend:
    """The trainer's backend, with `generate` and `logprobs` served by `workers` Ray actors."""

    def __init__(
        self,
        local,
        model_cfg,
        workers: int,
        seed: int = 0,
        ray_address: str | None = None,
        engine: str = "hf",
        gpu_memory_utilization: float = 0.3,
        gpus_per_worker: float = 1.0,
        max_model_len: int = 4096,
    ):
        from seed.dist.ray_utils import cpus_per_worker, init_ray

        self.local, self.ray = local, init_ray(ray_address)
        gpus = gpus_per_worker if engine == "vllm" or model_cfg.device == "cuda" else 0
        actor = self.ray.remote(num_cpus=cpus_per_worker(workers), num_gpus=gpus)(GenerationWorker)
        self.actors = [
            actor.remote(
                model_cfg.name,
                model_cfg.device,
                model_cfg.precision,
                seed + 1000 * (i + 1),
                model_cfg.lora,
                engine,
                gpu_memory_utilization,
                max_model_len,
            )
            for i in range(workers)
        ]
        self._pushed = None
        self.pushes = 0

    def _version(self) -> int:
        return sum(p._version for p in self.local.model.parameters())

    def push_weights(self) -> None:
        """Send the trainer's current weights to every replica if they changed since the last push."""
        version = self._version()
        if version != self._pushed:
            self.load_weights(self.local.model.state_dict())
            self._pushed = version

    def load_weights(self, state_dict: dict) -> None:
        """`state_dict` into every replica (one `ray.put`, shared by all actors)."""
        ref = self.ray.put({k: v.detach().to("cpu") for k, v in state_dict.items()})
        self.ray.get([a.load_weights.remote(ref) for a in self.actors])
        self.pushes += 1

    def generate(
        self, prompts: list[list[int]], sampling: Sampling, batch_size: int = 64, images: list[list] | None = None
    ) -> list[Generation]:
        self.push_weights()
        parts = _split(len(prompts), len(self.actors))
        futures = [
            a.generate.remote([prompts[i] for i in r], sampling, batch_size, _rows(images, r))
            for a, r in zip(self.actors, parts)
        ]
        return [g for chunk in self.ray.get(futures) for g in chunk]

    def logprobs(
        self,
        prompts: list[list[int]],
        responses: list[list[int]],
        token_budget: int = 8192,
        images: list[list] | None = None,
    ):
        self.push_weights()
        parts = _split(len(prompts), len(self.actors))
        futures = [
            a.logprobs.remote([prompts[i] for i in r], [responses[i] for i in r], token_budget, _rows(images, r))
            for a, r in zip(self.actors, parts)
        ]
        return [lp for chunk in self.ray.get(futures) for lp in chunk]

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a, no_restart=True)
        self.actors.clear()
