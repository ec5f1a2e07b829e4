"""A KV cache for decoding whose storage is reserved once, so a decode step appends in place.

transformers' `DynamicLayer` appends by `torch.cat`, which copies the layer's whole cache on every decode step:
O(length) memory traffic per token per layer. On CPU, with analysis-length prompts, that copy costs about as
much as the step's attention. `reserve_decode_cache` swaps each layer of a prefilled cache for a
`ReservedLayer` whose keys and values are views into storage sized for the prompt plus the token budget;
`merge_left_padded` builds the same from prompts prefilled in length buckets.
"""

from __future__ import annotations

import functools
import inspect

import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicCache, DynamicLayer


class ReservedLayer(DynamicLayer):
    """A `DynamicLayer` backed by [batch, heads, capacity, head_dim] storage; `keys`/`values` are its filled
    prefix. Appending writes into the storage; only running past the capacity reallocates (doubling). The
    inherited cache operations (crop, reorder, repeat, reset) work unchanged: the layer adopts what they leave."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, capacity: int):
        super().__init__()
        self.device = keys.device
        self.is_initialized = True
        self._length = keys.shape[-2]
        self._k = self._storage(keys, max(capacity, self._length))
        self._v = self._storage(values, max(capacity, self._length))
        self._expose()

    @staticmethod
    def _storage(filled: torch.Tensor, capacity: int) -> torch.Tensor:
        b, h, n, d = filled.shape
        out = filled.new_empty((b, h, capacity, d))
        out[:, :, :n] = filled
        return out

    def _expose(self) -> None:
        self.keys = self._k[:, :, : self._length]
        self.values = self._v[:, :, : self._length]

    def _adopt(self) -> None:
        """Take over the keys/values an inherited method left behind: a crop shortens the filled prefix in place;
        `reorder_cache`, `batch_repeat_interleave` or `offload` put new tensors there, which become the filled
        prefix of new storage; after `reset` the layer is empty."""
        if self.keys is None or not self.is_initialized:  # reset
            self._length = 0
        elif self.keys.data_ptr() == self._k.data_ptr() and self.keys.shape[:2] == self._k.shape[:2]:
            self._length = self.keys.shape[-2]  # a view of our storage: cropped or unchanged
        else:
            capacity = max(self._k.shape[-2], self.keys.shape[-2])
            self._length = self.keys.shape[-2]
            self._k, self._v = self._storage(self.keys, capacity), self._storage(self.values, capacity)
        self._expose()

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        self._adopt()
        n, m = self._length, key_states.shape[-2]
        if n + m > self._k.shape[-2] or key_states.shape[0] != self._k.shape[0]:
            capacity = 2 * (n + m)
            self._k = (
                self._storage(self.keys, capacity)
                if n
                else key_states.new_empty((*key_states.shape[:2], capacity, key_states.shape[-1]))
            )
            self._v = (
                self._storage(self.values, capacity)
                if n
                else value_states.new_empty((*value_states.shape[:2], capacity, value_states.shape[-1]))
            )
        self._k[:, :, n : n + m] = key_states
        self._v[:, :, n : n + m] = value_states
        self._length = n + m
        self.is_initialized = True
        self._expose()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        self._adopt()
        return self._length

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._adopt()
        self._k, self._v = self._k[indices], self._v[indices]
        self._expose()


def reserve_decode_cache(cache, extra_tokens: int):
    """Give every full-attention layer of a prefilled cache room for `extra_tokens` more positions, in place.
    Layers of any other kind (sliding windows, linear attention) are left as they are."""
    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer and layer.is_initialized and layer.keys.numel():
            cache.layers[i] = ReservedLayer(layer.keys, layer.values, layer.keys.shape[-2] + extra_tokens)
    return cache


def merge_left_padded(caches: list, widths: list[int], extra_tokens: int):
    """One decode cache from caches prefilled separately (one per length bucket, each left-padded to its own
    width): every bucket's K/V are left-padded with zeros to the widest bucket and stacked along the batch, in
    the order given. The zero positions are masked by the caller's attention mask, as left padding always is."""
    width = max(widths)
    merged = DynamicCache()
    merged.layers = []
    for layer_idx in range(len(caches[0].layers)):
        keys, values = [], []
        for cache, w in zip(caches, widths):
            layer = cache.layers[layer_idx]
            keys.append(F.pad(layer.keys, (0, 0, width - w, 0)))
            values.append(F.pad(layer.values, (0, 0, width - w, 0)))
        merged.layers.append(ReservedLayer(torch.cat(keys), torch.cat(values), width + extra_tokens))
    return merged


def cache_keyword(model) -> str:
    """transformers 5.x renamed the KV-cache argument `past_key_values` to `cache`; speak whichever it takes."""
    from peft import PeftModel

    base = model.get_base_model() if isinstance(model, PeftModel) else model
    return _cache_keyword_of(type(base))


@functools.cache
def _cache_keyword_of(model_class: type) -> str:  # one signature inspection per class, not per forward
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def cache_of(out):
    """The KV cache of a model output, under either name."""
    return out.cache if "cache" in out else out.past_key_values
