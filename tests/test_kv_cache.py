"""The reserved decode cache holds exactly what transformers' concatenating cache holds, step by step."""

import os
import subprocess
import sys

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

from seed.models.kv_cache import ReservedLayer, reserve_decode_cache


def _kv(b, n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, 3, n, 4, generator=g), torch.randn(b, 3, n, 4, generator=g)


def test_appends_compaction_and_growth_match_the_concatenating_layer():
    k0, v0 = _kv(3, 5, 0)
    plain, reserved = DynamicLayer(), ReservedLayer(k0, v0, capacity=7)  # room for 2 steps, then it must grow
    plain.update(k0, v0)
    for step in range(6):
        if step == 3:  # row 1 finished: both keep rows 0 and 2
            idx = torch.tensor([0, 2])
            plain.batch_select_indices(idx)
            reserved.batch_select_indices(idx)
        k, v = _kv(plain.keys.shape[0], 1, step + 1)
        pk, pv = plain.update(k, v)
        rk, rv = reserved.update(k, v)
        assert torch.equal(pk, rk) and torch.equal(pv, rv)
        assert reserved.get_seq_length() == plain.get_seq_length() == 6 + step


def test_reserve_swaps_only_filled_full_attention_layers():
    cache = DynamicCache()
    k, v = _kv(2, 4, 0)
    cache.update(k, v, 0)
    reserve_decode_cache(cache, extra_tokens=8)
    layer = cache.layers[0]
    assert isinstance(layer, ReservedLayer) and layer._k.shape[-2] == 12
    assert torch.equal(layer.keys, k) and cache.get_seq_length() == 4


def test_kernel_cache_bounds_are_defaults_the_user_can_override():
    code = "import seed, os; print(os.environ['LRU_CACHE_CAPACITY'], os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
    env = {k: v for k, v in os.environ.items() if k not in ("LRU_CACHE_CAPACITY", "ONEDNN_PRIMITIVE_CACHE_CAPACITY")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["64", "64"]
    env["LRU_CACHE_CAPACITY"] = "128"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["128", "64"]


def test_reserved_layer_follows_every_inherited_cache_operation_like_a_dynamic_layer():
    k, v = _kv(3, 5, 0)
    reserved, dynamic = ReservedLayer(k, v, capacity=8), DynamicLayer()
    dynamic.update(k, v)
    steps = [
        ("crop", -2),
        ("update", _kv(3, 4, 1)),
        ("reorder_cache", torch.tensor([2, 0, 1])),
        ("update", _kv(3, 1, 2)),
        ("batch_repeat_interleave", 2),
        ("update", _kv(6, 7, 3)),
        ("batch_select_indices", torch.tensor([5, 0])),
        ("crop", -3),
        ("update", _kv(2, 2, 4)),
        ("reset", None),
        ("update", _kv(2, 3, 5)),
    ]
    for name, arg in steps:
        for layer in (reserved, dynamic):
            if name == "update":
                layer.update(*arg)
            else:
                getattr(layer, name)(*([] if arg is None else [arg]))
        assert reserved.get_seq_length() == dynamic.get_seq_length(), name
        if dynamic.keys is not None:  # (None after a reset)
            assert torch.equal(reserved.keys, dynamic.keys) and torch.equal(reserved.values, dynamic.values), name
