"""Vision-language models on the HF backend: image placeholders, pixel inputs, scoring and decoding.

A prompt that shows images holds one placeholder token per image (the chat template's image part, written once by
the renderer), so that prompt ids never depend on an image processor: student and teacher prompts, token budgets
and episode files stay what they are for text. At the model's input each placeholder expands to its image's patch
tokens (`VisionInputs.expand`) and the image processor's pixels go along, as the Qwen2-VL family's own processor
does. Each row's images are its own, in the order of its placeholders.

Scoring is one plain forward over each full sequence (the text path's prefix sharing does not carry the images'
3-D positions); decoding prefills the left-padded prompts with their pixels, then steps with the model's cache,
whose positions continue from the prefill's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from seed.models.batching import token_budget_batches
from seed.models.decoding import next_tokens, take_token
from seed.models.kv_cache import cache_keyword, cache_of
from seed.models.options import Generation, Sampling
from seed.models.precision import autocast_context
from seed.models.token_logps import head_token_logps

IMAGE_PLACEHOLDER = "<|image_pad|>"  # the Qwen2-VL family's image token; the tiny test VLM adds the same ones
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", IMAGE_PLACEHOLDER, "<|video_pad|>")

# ChatML with image parts (as the Qwen2-VL templates write them), for the tiny VLM on SmolLM2's tokenizer
VISION_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def is_vision_model(model) -> bool:
    return getattr(model.config, "vision_config", None) is not None


@dataclass(frozen=True)
class VisionInputs:
    """What a vision-language model takes beside token ids, from a HF image processor of the Qwen2-VL kind (pixel
    patches and each image's (t, h, w) patch grid; `merge_size`² patches make one token)."""

    image_processor: Any
    placeholder_id: int
    merge_size: int

    def pixels(self, images: list) -> tuple[dict[str, torch.Tensor], list[int]]:
        """The model's pixel inputs for `images` (in order) and how many tokens each image takes."""
        if not images:
            return {}, []
        encoded = self.image_processor(images=images, return_tensors="pt")
        grids = encoded["image_grid_thw"]
        counts = [int(g.prod()) // self.merge_size**2 for g in grids]
        return {"pixel_values": encoded["pixel_values"], "image_grid_thw": grids}, counts

    def expand(self, prompt: list[int], counts: list[int]) -> list[int]:
        """`prompt` with its k-th placeholder repeated `counts[k]` times."""
        places = [i for i, t in enumerate(prompt) if t == self.placeholder_id]
        if len(places) != len(counts):
            raise ValueError(f"a prompt has {len(places)} image placeholders for {len(counts)} images")
        out, start = [], 0
        for place, count in zip(places, counts):
            out += prompt[start:place] + [self.placeholder_id] * count
            start = place + 1
        return out + prompt[start:]

    def batch(self, prompts: list[list[int]], images: list[list] | None) -> tuple[list[list[int]], dict]:
        """Expanded prompts and the pixel inputs of all their images, row after row."""
        images = images if images is not None else [[] for _ in prompts]
        if len(images) != len(prompts):
            raise ValueError(f"{len(images)} image lists for {len(prompts)} prompts")
        flat = [image for row in images for image in row]
        inputs, counts = self.pixels(flat)
        expanded, k = [], 0
        for prompt, row in zip(prompts, images):
            expanded.append(self.expand(list(prompt), counts[k : k + len(row)]))
            k += len(row)
        return expanded, inputs


class VisionEngine:
    """Scoring and decoding of a vision-language model: the `HFScorer` and `HFDecoder` of an image-text model."""

    def __init__(
        self,
        model,
        tokenizer,
        vision: VisionInputs,
        device: torch.device,
        amp_dtype: torch.dtype | None,
        generator: torch.Generator,
    ):
        self.model, self.tokenizer, self.vision, self.device = model, tokenizer, vision, device
        self.amp_dtype, self.generator = amp_dtype, generator

    def autocast(self):
        return autocast_context(self.device, self.amp_dtype)

    def _hidden(self, ids: torch.Tensor, attn: torch.Tensor, pixels: dict, **kw):
        pixels = {k: v.to(self.device) for k, v in pixels.items()}
        return self.model.model(input_ids=ids.to(self.device), attention_mask=attn.to(self.device), **pixels, **kw)

    def _padded(self, rows: list[list[int]], left: bool) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        for b, row in enumerate(rows):
            span = slice(width - len(row), width) if left else slice(0, len(row))
            ids[b, span], attn[b, span] = torch.tensor(row, dtype=torch.long), 1
        return ids, attn

    def forward_logps(
        self,
        prompts: list[list[int]],
        responses: list[list[int]],
        with_entropy: bool = False,
        images: list[list] | None = None,
    ):
        """Per-token log-probs of `responses` after `prompts` and their images, padded [batch, max_response] (+ mask,
        + entropy), under the current grad mode."""
        n, rmax = len(prompts), max((len(r) for r in responses), default=0)
        logps, mask = torch.zeros((n, rmax), device=self.device), torch.zeros((n, rmax), device=self.device)
        ent = torch.zeros((n, rmax), device=self.device) if with_entropy else None
        if not any(responses):
            return logps, mask, ent
        expanded, pixels = self.vision.batch(prompts, images)
        ids, attn = self._padded([p + list(r) for p, r in zip(expanded, responses)], left=False)
        with self.autocast():
            hidden = self._hidden(ids, attn, pixels).last_hidden_state
            rows = [b for b in range(n) if responses[b]]
            # response token k is predicted from the position before it
            picked = torch.cat(
                [hidden[b, len(expanded[b]) - 1 : len(expanded[b]) - 1 + len(responses[b])] for b in rows]
            )
            targets = torch.tensor([t for b in rows for t in responses[b]], device=self.device, dtype=torch.long)
            tok_lp, tok_ent = head_token_logps(self.model.get_output_embeddings(), picked, targets, with_entropy)
        offset = 0
        for b in rows:
            k = len(responses[b])
            logps[b, :k], mask[b, :k] = tok_lp[offset : offset + k], 1
            if with_entropy:
                ent[b, :k] = tok_ent[offset : offset + k]
            offset += k
        return logps, mask, ent

    @torch.no_grad()
    def logprobs(
        self,
        prompts: list[list[int]],
        responses: list[list[int]],
        token_budget: int = 8192,
        images: list[list] | None = None,
    ) -> list[list[float]]:
        """No-grad per-token log-probs, a few rows per forward (`token_budget` padded tokens of the compact ids)."""
        was_training = self.model.training
        self.model.eval()
        images = images if images is not None else [[] for _ in prompts]
        out: list[list[float]] = [[] for _ in prompts]
        for micro in token_budget_batches([len(p) + len(r) for p, r in zip(prompts, responses)], token_budget):
            lp, _, _ = self.forward_logps(
                [prompts[i] for i in micro], [responses[i] for i in micro], images=[images[i] for i in micro]
            )
            for j, i in enumerate(micro):
                out[i] = lp[j, : len(responses[i])].tolist()
        if was_training:
            self.model.train()
        return out

    @torch.no_grad()
    def generate(
        self, prompts: list[list[int]], sampling: Sampling, batch_size: int = 64, images: list[list] | None = None
    ) -> list[Generation]:
        images = images if images is not None else [[] for _ in prompts]
        out: list[Generation] = []
        for i in range(0, len(prompts), batch_size):
            out += self._generate_batch(prompts[i : i + batch_size], sampling, images[i : i + batch_size])
        return out

    def _generate_batch(self, prompts: list[list[int]], sampling: Sampling, images: list[list]) -> list[Generation]:
        model, tok = self.model, self.tokenizer
        was_training = model.training
        model.eval()
        n = len(prompts)
        expanded, pixels = self.vision.batch(prompts, images)
        ids, attn = self._padded(expanded, left=True)
        attn = attn.to(self.device)
        eos = {tok.eos_token_id}
        head = model.get_output_embeddings()
        gen_ids: list[list[int]] = [[] for _ in range(n)]
        gen_logps: list[list[float]] = [[] for _ in range(n)]
        stopped = [False] * n
        with self.autocast():
            res = self._hidden(ids, attn, pixels, use_cache=True)
        cache_kw = cache_keyword(self.model.model)
        # finished rows stay in the batch (the model keeps each row's position offset), their tokens unused
        for _ in range(sampling.max_new_tokens):
            with self.autocast():
                logits = head(res.last_hidden_state[:, -1, :].contiguous()).float()
            nxt, tok_logp = next_tokens(logits, sampling, self.generator)
            for row in range(n):
                if not stopped[row]:
                    stopped[row] = not take_token(
                        int(nxt[row]), float(tok_logp[row]), gen_ids[row], gen_logps[row], sampling, tok, eos
                    )
            if all(stopped):
                break
            attn = torch.cat([attn, torch.ones((n, 1), dtype=attn.dtype, device=self.device)], dim=1)
            with self.autocast():
                res = self.model.model(
                    input_ids=nxt[:, None], attention_mask=attn, use_cache=True, **{cache_kw: cache_of(res)}
                )
        if was_training:
            model.train()
        return [
            Generation(gen_ids[r], gen_logps[r], tok.decode(gen_ids[r], skip_special_tokens=True), stopped[r])
            for r in range(n)
        ]


def tiny_vision_model(tokenizer, seed: int = 0, hidden: int = 64, layers: int = 2):
    """A random-init Qwen2.5-VL of a few layers with a small vision tower, on a tokenizer that has the vision
    tokens (`with_vision_tokens`): real code paths, test-sized."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in VISION_TOKENS}
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rope_scaling={"type": "mrope", "mrope_section": [2, 2, 4]},  # sums to half the head dimension (16)
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    vision = dict(
        depth=2,
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        out_hidden_size=hidden,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        window_size=56,
        fullatt_block_indexes=[1],
        in_channels=3,
    )
    torch.manual_seed(seed)
    config = Qwen2_5_VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids[IMAGE_PLACEHOLDER],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return Qwen2_5_VLForConditionalGeneration(config)


def with_vision_tokens(tokenizer):
    """SmolLM2's tokenizer with the Qwen2-VL vision tokens and a chat template that writes image parts."""
    tokenizer.add_special_tokens({"additional_special_tokens": list(VISION_TOKENS)})
    tokenizer.chat_template = VISION_CHAT_TEMPLATE
    return tokenizer


def tiny_image_processor():
    """Qwen2-VL's image processor (its Pillow backend: no torchvision) at a small size: 4 to 16 tokens an image."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(
        min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 16, patch_size=14, merge_size=2, temporal_patch_size=2
    )


def image_processor_of(path: str):
    """A model folder's (or hub id's) image processor, on the Pillow backend where transformers offers one."""
    from transformers import AutoImageProcessor

    try:
        return AutoImageProcessor.from_pretrained(path, backend="pil")
    except (TypeError, ValueError, ImportError):
        return AutoImageProcessor.from_pretrained(path)


def vision_inputs(model, tokenizer, image_processor) -> VisionInputs:
    """The model's image placeholder (its config's `image_token_id`) and the processor's merge size."""
    placeholder = getattr(model.config, "image_token_id", None)
    if placeholder is None:
        placeholder = tokenizer.convert_tokens_to_ids(IMAGE_PLACEHOLDER)
    merge = getattr(image_processor, "merge_size", None) or model.config.vision_config.spatial_merge_size
    return VisionInputs(image_processor, int(placeholder), int(merge))
