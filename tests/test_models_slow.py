"""The real bundled SmolLM2 (slow: converts the GGUF on first use, ~30 s; run with `pytest -m slow`)."""

import pytest

from seed.models import HFBackend, Sampling, load_model, load_tokenizer, smollm2_folder

pytestmark = pytest.mark.slow


def test_smollm2_loads_from_the_bundled_gguf_and_answers():
    folder = smollm2_folder()
    assert (folder / "config.json").exists()
    tok = load_tokenizer("smollm2-135m-instruct")
    backend = HFBackend(load_model("smollm2-135m-instruct", tok), tok, precision="auto")
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True, tokenize=True
    )
    prompt = list(prompt["input_ids"] if not isinstance(prompt, list) else prompt)
    out = backend.generate([prompt], Sampling(greedy=True, max_new_tokens=12, stop=(".",)))[0]
    assert "Paris" in out.text


def test_lora_wraps_smollm2_and_only_adapters_train():
    tok = load_tokenizer("smollm2-135m-instruct")
    model = load_model(
        "smollm2-135m-instruct", tok, lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    )
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora" in n for n in trainable)
