"""Generation and scoring backend on a tiny model: log-probs agree, compaction is exact, the bf16 copy syncs."""
import torch

from seed.models import HFBackend, Sampling, load_model, token_budget_batches


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


def test_finished_rows_leave_the_batch_without_changing_the_others(tokenizer):
    b = _backend(tokenizer)
    prompts = [tokenizer.encode("x y z"), tokenizer.encode("one two three four")]
    alone = b.generate([prompts[1]], Sampling(greedy=True, max_new_tokens=8, stop=("zzzz",)))[0]
    first = b.generate([prompts[0]], Sampling(greedy=True, max_new_tokens=8, stop=("zzzz",)))[0]
    # stop the first row after its first token: the second row must decode exactly as it does alone
    stop = tokenizer.decode(first.ids[:1])
    together = b.generate(prompts, Sampling(greedy=True, max_new_tokens=8, stop=(stop,) if stop.strip() else ("zzzz",)))
    assert together[1].ids == alone.ids


def test_bf16_generation_copy_follows_optimizer_steps(tokenizer):
    b = _backend(tokenizer, precision="bf16")
    gen = b.generation_model()
    assert gen is not b.model and next(gen.parameters()).dtype == torch.bfloat16
    opt = torch.optim.SGD(b.model.parameters(), lr=1.0)
    loss = sum(p.sum() for p in b.model.parameters())
    loss.backward()
    opt.step()
    gen = b.generation_model()
    for dst, src in zip(gen.parameters(), b.model.parameters()):
        assert torch.equal(dst, src.detach().to(torch.bfloat16))


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
