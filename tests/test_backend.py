"""Generation and scoring backend on a tiny model: log-probs agree, compaction is exact, the bf16 copy syncs."""

import pytest
import torch

from seed.models import HFBackend, Sampling, load_model, prompt_sharing_batches, token_budget_batches
from seed.models.batching import length_buckets, prefix_stages
from seed.models.decoding import sample_tokens


def _backend(tokenizer, precision="fp32"):
    return HFBackend(load_model("tiny-random", tokenizer), tokenizer, precision=precision, seed=0)


def test_rollout_logps_match_a_full_forward(tokenizer):
    b = _backend(tokenizer)
    prompts = [tokenizer.encode("hello there"), tokenizer.encode("a much longer prompt with more words in it")]
    gens = b.generate(prompts, Sampling(temperature=1.0, max_new_tokens=6, stop=("zzzz",)))
    scored = b.logprobs(prompts, [g.ids for g in gens])
    for g, s in zip(gens, scored):
        assert len(g.ids) == len(g.logps) == len(s) > 0
        assert torch.allclose(torch.tensor(g.logps), torch.tensor(s), atol=1e-4)


def test_prefill_gives_the_models_last_logits_from_a_contiguous_head_input(tokenizer):
    # a strided [batch, 1, hidden] slice makes a bf16 CPU linear compute every position's logits (GBs on real
    # prompts): the head must only ever see a contiguous copy of the last positions
    b = _backend(tokenizer)
    prompts = [tokenizer.encode("hello there"), tokenizer.encode("a much longer prompt with more words in it")]
    seen = []
    hook = b.model.get_output_embeddings().register_forward_pre_hook(lambda m, args: seen.append(args[0]))
    cache, logits = b.decoder._prefill(b.model, prompts)
    hook.remove()
    assert seen and all(
        x.is_contiguous() and x.shape[0] == len(prompts) and x.numel() == len(prompts) * x.shape[-1] for x in seen
    )
    assert cache.get_seq_length() == max(len(p) for p in prompts)
    for p, row in zip(prompts, logits):
        alone = b.model(input_ids=torch.tensor([p])).logits[0, -1]
        assert torch.allclose(row, alone, atol=1e-4)


def test_finished_rows_leave_the_batch_without_changing_the_others(tokenizer):
    b = _backend(tokenizer)
    prompts = [tokenizer.encode("x y z"), tokenizer.encode("one two three four")]
    alone = b.generate([prompts[1]], Sampling(greedy=True, max_new_tokens=8, stop=("zzzz",)))[0]
    first = b.generate([prompts[0]], Sampling(greedy=True, max_new_tokens=8, stop=("zzzz",)))[0]
    # stop the first row after its first token: the second row must decode exactly as it does alone
    stop = tokenizer.decode(first.ids[:1])
    together = b.generate(prompts, Sampling(greedy=True, max_new_tokens=8, stop=(stop,) if stop.strip() else ("zzzz",)))
    assert together[1].ids == alone.ids


def test_prompts_prefilled_in_length_buckets_decode_as_they_do_alone(tokenizer):
    b = _backend(tokenizer)
    prompts = [tokenizer.encode(" ".join(["word"] * n)) for n in (3, 40, 12, 41)]
    assert len(length_buckets([len(p) for p in prompts])) == 3  # 3 | 12 | 40, 41: the batch really is split
    greedy = Sampling(greedy=True, max_new_tokens=10, stop=("zzzz",))
    together = b.generate(prompts, greedy)
    for p, g in zip(prompts, together):
        alone = b.generate([p], greedy)[0]
        assert g.ids == alone.ids
        assert torch.allclose(torch.tensor(g.logps), torch.tensor(alone.logps), atol=1e-5)


def test_length_buckets_bound_padding_and_cover_every_row():
    lengths = [800, 250, 810, 460, 255, 825, 580]
    buckets = length_buckets(lengths, max_padding=0.1)
    assert sorted(i for b in buckets for i in b) == list(range(len(lengths)))
    assert [[lengths[i] for i in b] for b in buckets] == [[250, 255], [460], [580], [800, 810, 825]]
    for b in buckets:
        assert len(b) * max(lengths[i] for i in b) <= 1.1 * sum(lengths[i] for i in b)


def test_bf16_generation_copy_follows_optimizer_steps(tokenizer):
    b = _backend(tokenizer, precision="bf16")
    gen = b.decoder.generation_model()
    assert gen is not b.model and next(gen.parameters()).dtype == torch.bfloat16
    opt = torch.optim.SGD(b.model.parameters(), lr=1.0)
    loss = sum(p.sum() for p in b.model.parameters())
    loss.backward()
    opt.step()
    gen = b.decoder.generation_model()
    for dst, src in zip(gen.parameters(), b.model.parameters()):
        assert torch.equal(dst, src.detach().to(torch.bfloat16))


def test_released_generation_copy_is_rebuilt_equal_tied_and_frozen(tokenizer):
    b = _backend(tokenizer, precision="bf16")
    b.model.get_input_embeddings().weight.grad = torch.ones_like(b.model.get_input_embeddings().weight)
    first = {k: v.clone() for k, v in b.decoder.generation_model().state_dict().items()}
    b.release_generation_copy()
    gen = b.decoder.generation_model()
    assert gen.state_dict().keys() == first.keys()
    assert all(torch.equal(gen.state_dict()[k], v) for k, v in first.items())
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad and p.grad is None for p in gen.parameters())
    tied = b.model.get_input_embeddings().weight is b.model.get_output_embeddings().weight
    assert (gen.get_input_embeddings().weight is gen.get_output_embeddings().weight) == tied
    assert all(p.dtype == torch.float32 for p in b.model.parameters())  # the trained model is untouched


def test_token_budget_batches_cover_all_and_respect_budget():
    lengths = [5, 100, 30, 30, 60, 1]
    groups = token_budget_batches(lengths, 120)
    assert sorted(i for g in groups for i in g) == list(range(6))
    for g in groups:
        assert len(g) == 1 or len(g) * max(lengths[i] for i in g) <= 120


def test_lora_model_trains_only_adapters(tokenizer):
    model = load_model("tiny-random", tokenizer, lora={"r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"]})
    b = HFBackend(model, tokenizer, precision="fp32")
    prompts, responses = [tokenizer.encode("hi")], [tokenizer.encode(" there")]
    logp, mask, _ = b.forward_logps(prompts, responses)
    (-(logp * mask).sum()).backward()
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora" in n for n in trainable)
    assert all(p.grad is not None for n, p in model.named_parameters() if n in trainable)


def _full_forward_logps(model, prompts, responses):
    """The plain reference: one forward over each full sequence on its own."""
    out = []
    for p, r in zip(prompts, responses):
        logits = model(input_ids=torch.tensor([p + r])).logits[0].float()
        lp = torch.log_softmax(logits[len(p) - 1 : len(p) + len(r) - 1], dim=-1)
        out.append(lp.gather(-1, torch.tensor(r)[:, None]).squeeze(-1))
    return out


def _assert_equals_full_forwards(b, prompts, responses, logp, mask):
    """`logp` (from the shared-prompt path, with grad) matches one full forward per sequence in value and gradient."""
    (logp * mask).sum().backward()
    fast_grads = [p.grad.clone() for p in b.model.parameters()]
    b.model.zero_grad()
    reference = _full_forward_logps(b.model, prompts, responses)
    sum(r.sum() for r in reference).backward()
    for row, (r, ref) in enumerate(zip(responses, reference)):
        assert torch.allclose(logp[row, : len(r)], ref, atol=1e-5)
    for fast, p in zip(fast_grads, b.model.parameters()):
        assert torch.allclose(fast, p.grad, atol=1e-5, rtol=1e-4)


def test_shared_prompt_forward_equals_full_forwards_in_value_and_gradient(tokenizer):
    b = _backend(tokenizer)
    head = tokenizer.encode("system: you push boxes. user: step")
    prompts = [
        head + tokenizer.encode(" one, box left"),
        head + tokenizer.encode(" two, box up and left again"),
        head + tokenizer.encode(" one, box left"),
        head + tokenizer.encode(" three"),
        head[:3],
    ]
    responses = [
        tokenizer.encode(" <action>left</action>"),
        tokenizer.encode(" up"),
        tokenizer.encode(" <think>go</think> down"),
        [],
        tokenizer.encode(" right now"),
    ]
    logp, mask, ent = b.forward_logps(prompts, responses, with_entropy=True)
    _assert_equals_full_forwards(b, prompts, responses, logp, mask)
    for row, r in enumerate(responses):
        assert mask[row].sum().item() == len(r)
    assert (ent[mask.bool()] > 0).all()
    full_logp, full_mask, full_ent = b.scorer.forward_logps_full(
        prompts, responses, with_entropy=True
    )  # batched plain path
    assert torch.equal(full_mask, mask)
    assert torch.allclose(full_logp, logp.detach(), atol=1e-5) and torch.allclose(full_ent, ent.detach(), atol=1e-4)


def test_prompts_sharing_a_longer_prefix_in_groups_score_as_full_forwards(tokenizer):
    b = _backend(tokenizer).with_options(group_prefix_tokens=16)
    head = tokenizer.encode("system: you push boxes.")
    skill = tokenizer.encode(" skill: push the box down first, then walk around it and push it left twice")
    assert len(skill) >= 16  # long enough to form a group stage
    prompts = [
        head + skill + tokenizer.encode(" step one"),
        head + skill + tokenizer.encode(" step two, box up"),
        head + tokenizer.encode(" no skill here"),
        head + skill[:-3] + tokenizer.encode(" other"),
    ]
    stages = prefix_stages(prompts, len(head))
    # the shared head; one row per group (the two full-skill prompts) and per loner (14 shared tokens < 16); tails
    assert [len(segments) for segments, _ in stages] == [1, 3, 4]
    assert sorted(len(segment) for segment in stages[1][0]) == [0, 0, 18]
    responses = [
        tokenizer.encode(" <action>left</action>"),
        tokenizer.encode(" up up"),
        tokenizer.encode(" down"),
        tokenizer.encode(" right"),
    ]
    logp, mask, _ = b.forward_logps(prompts, responses)
    _assert_equals_full_forwards(b, prompts, responses, logp, mask)


def test_prompt_sharing_batches_keep_identical_prompts_together_within_budget():
    prompts = [[1] * 50, [2] * 40, [1] * 50, [3] * 50, [1] * 50, [2] * 40]
    responses = [[9] * 5] * 6
    groups = prompt_sharing_batches(prompts, responses, budget=130)
    assert sorted(i for g in groups for i in g) == list(range(6))
    for g in groups:
        distinct = {tuple(prompts[i]) for i in g}
        assert len(g) == 1 or len(distinct) * max(len(prompts[i]) for i in g) + len(g) * 5 <= 130
    where = {i: k for k, g in enumerate(groups) for i in g}
    assert where[0] == where[2] == where[4] and where[1] == where[5] and len(groups) == 2


def test_repeated_pairs_are_scored_once_with_their_own_numbers(tokenizer):
    b = _backend(tokenizer)
    p1, p2 = tokenizer.encode("state one"), tokenizer.encode("state two, box left")
    r1, r2 = tokenizer.encode(" up"), tokenizer.encode(" <action>left</action>")
    prompts, responses = [p1, p2, p1, p1, p2], [r1, r2, r1, r2, r2]
    rows = []
    forward = b.scorer.forward_logps
    b.scorer.forward_logps = lambda ps, rs, **kw: (rows.extend(zip(ps, rs)), forward(ps, rs, **kw))[1]
    scored = b.logprobs(prompts, responses)
    assert len(rows) == 3  # (p1, r1), (p2, r2), (p1, r2)
    with torch.no_grad():
        for p, r, s in zip(prompts, responses, scored):
            assert torch.allclose(torch.tensor(s), _full_forward_logps(b.model, [p], [r])[0], atol=1e-5)
    assert scored[0] == scored[2] and scored[0] is not scored[2]  # callers may write to their rows


def test_repeated_prompts_and_their_common_prefix_prefill_once_and_decode_as_alone(tokenizer):
    b = _backend(tokenizer)
    head = tokenizer.encode("system: you push boxes on a grid. user: the grid is")
    prompts = [head + tokenizer.encode(" " + " ".join(["wall"] * n)) for n in (2, 30, 2, 9, 31)]  # rows 0, 2 repeat
    prefilled = []
    prefill = b.decoder._prefill
    b.decoder._prefill = lambda model, ps, prefix=None: (
        prefilled.append(sum(len(p) for p in ps)),
        prefill(model, ps, prefix),
    )[1]
    greedy = Sampling(greedy=True, max_new_tokens=8, stop=("zzzz",))
    together = b.generate(prompts, greedy)
    shared = len(head) + 1  # " wall" is common too
    distinct = [prompts[i] for i in (0, 1, 3, 4)]
    assert sum(prefilled) == shared + sum(len(p) - shared for p in distinct)  # the head once, row 2 not at all
    b.decoder._prefill = prefill
    for p, g in zip(prompts, together):
        alone = b.generate([p], greedy)[0]
        assert g.ids == alone.ids
        assert torch.allclose(torch.tensor(g.logps), torch.tensor(alone.logps), atol=1e-5)
    sampled = b.generate([prompts[0]] * 6, Sampling(temperature=1.0, max_new_tokens=8, stop=("zzzz",)))
    assert len({tuple(g.ids) for g in sampled}) > 1  # copies of one prompt still sample independently
    scored = b.logprobs([prompts[0]] * 6, [g.ids for g in sampled])
    for g, s in zip(sampled, scored):
        assert torch.allclose(torch.tensor(g.logps), torch.tensor(s), atol=1e-4)


def test_sampled_tokens_follow_the_tempered_softmax():
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0])
    logits = probs.log().expand(40_000, 4)  # the zero-probability token has logit -inf
    g = torch.Generator().manual_seed(0)
    for temperature, expected in ((1.0, probs), (0.5, probs**2 / (probs**2).sum())):
        drawn = sample_tokens(logits, temperature, g)
        freq = torch.bincount(drawn, minlength=4).double() / len(drawn)
        assert torch.allclose(freq, expected.double(), atol=0.01), (temperature, freq)
        assert freq[3] == 0
    again = sample_tokens(logits[:50], 1.0, torch.Generator().manual_seed(1))
    assert torch.equal(again, sample_tokens(logits[:50], 1.0, torch.Generator().manual_seed(1)))


def test_lora_base_weights_live_in_the_autocast_dtype_with_the_same_numbers(tokenizer):
    # autocast re-casts a frozen weight on every call: the base is stored in bf16 instead, which must change no
    # log-prob and no adapter gradient, and the decoding copy shares it rather than holding a second one
    lora = {"r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj", "down_proj"]}
    prompts, responses = [tokenizer.encode("hi"), tokenizer.encode("a longer prompt")], [tokenizer.encode(" there")] * 2

    def scored(store_in_bf16: bool):
        model = load_model("tiny-random", tokenizer, lora=lora, seed=0)
        for name, p in model.named_parameters():
            if "lora_B" in name:  # non-zero adapters, so their path is exercised
                torch.nn.init.normal_(p, std=0.1, generator=torch.Generator().manual_seed(1))
        b = HFBackend(model, tokenizer, precision="bf16" if store_in_bf16 else "fp32")
        b.amp_dtype = torch.bfloat16  # the fp32-stored base under the same bf16 autocast
        b = b.with_options()  # engines rebuilt with it
        logp, mask, _ = b.forward_logps(prompts, responses)
        (-(logp * mask).sum()).backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        return b, logp.detach(), grads

    _, logp_fp32_base, grads_fp32_base = scored(False)
    stored, logp_bf16_base, grads_bf16_base = scored(True)
    base = [p for n, p in stored.model.named_parameters() if "base_layer" in n]
    assert base and all(p.dtype == torch.bfloat16 for p in base)
    assert all(p.dtype == torch.float32 for n, p in stored.model.named_parameters() if p.requires_grad)
    assert stored.model.get_input_embeddings().weight.dtype == torch.float32
    assert torch.equal(logp_fp32_base, logp_bf16_base)
    assert grads_fp32_base.keys() == grads_bf16_base.keys()
    for name in grads_fp32_base:
        assert torch.allclose(grads_fp32_base[name], grads_bf16_base[name], rtol=1e-5, atol=1e-7), name
    copy_params = {id(p) for p in stored.decoder.generation_model().parameters()}
    assert all(id(p) in copy_params for p in base)


def test_freed_weights_come_back_tied_with_buffers_untouched(tokenizer):
    from seed.models.weights import allocate_weights, free_weights

    model = load_model("tiny-random", tokenizer)
    model.tie_weights()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    buffers = {k: v.clone() for k, v in model.named_buffers()}
    free_weights(model)
    assert all(p.is_meta for p in model.parameters())
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert allocate_weights(model, torch.device("cpu")) and not allocate_weights(model, torch.device("cpu"))
    model.load_state_dict(state)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert all(torch.equal(v, buffers[k]) for k, v in model.named_buffers())


def test_every_backend_speaks_the_generation_interface_and_the_hf_one_the_trainable_one(tokenizer):
    import dataclasses
    import inspect

    from seed.dist.generation import GenerationWorker, RemoteBackend
    from seed.models.backend import EngineOptions, GenerationBackend, TrainableBackend
    from seed.models.vllm_backend import VLLMBackend

    def parameters(fn) -> list[str]:
        return [p for p in inspect.signature(fn).parameters if p != "self"]

    for cls in (HFBackend, VLLMBackend, GenerationWorker, RemoteBackend):
        for method in ("generate", "logprobs", "load_weights"):
            assert parameters(getattr(cls, method)) == parameters(getattr(GenerationBackend, method)), (cls, method)
    b = _backend(tokenizer)
    assert isinstance(b, GenerationBackend) and isinstance(b, TrainableBackend)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.options.plain_forward = True  # options are fixed at construction; with_options gives another backend
    plain = b.with_options(plain_forward=True)
    assert plain.options == EngineOptions(plain_forward=True) and b.options == EngineOptions()
    assert plain.model is b.model and plain.generator is b.generator
    assert plain.scorer.options.plain_forward and not b.scorer.options.plain_forward


def test_load_weights_replaces_the_models_weights(tokenizer):
    b = _backend(tokenizer)
    state = {k: torch.zeros_like(v) for k, v in b.model.state_dict().items()}
    b.load_weights(state)
    assert all(float(v.abs().sum()) == 0.0 for v in b.model.state_dict().values())
