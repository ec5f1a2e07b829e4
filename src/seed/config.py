"""One typed config: documented dataclasses, YAML files, dotted `key=value` overrides, validation up front.

Every error names the key and the allowed values, and is raised before any work starts.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


class ConfigError(ValueError):
    pass


def _choice(default: Any, *choices: Any, doc: str = "") -> Any:
    return field(default=default, metadata={"choices": choices, "doc": doc})


def _positive(default: Any, doc: str = "", minimum: float = 1, maximum: float | None = None) -> Any:
    return field(default=default, metadata={"min": minimum, "max": maximum, "doc": doc})


@dataclass
class ModelConfig:
    name: str = "smollm2-135m-instruct"  # bundled SmolLM2, "tiny-random", or any HF path / hub id
    device: str = _choice("cpu", "cpu", "cuda")
    precision: str = _choice("auto", "auto", "bf16", "fp32", doc="auto = bf16 autocast where the hardware has it")
    lora: dict | None = None  # e.g. {r: 16, lora_alpha: 32, target_modules: [q_proj, v_proj]}


@dataclass
class EnvConfig:
    name: str = _choice("alfworld", "alfworld", "sokoban")
    task_types: list[str] | None = None  # alfworld: subset of the six task types (None = all)
    max_steps: int = _positive(30)
    history_length: int = _positive(5, minimum=0)
    kwargs: dict = field(default_factory=dict)  # passed to the env constructor (e.g. num_receptacles)
    workers: int = _positive(0, minimum=0, doc="Ray env actors (0 = envs in the trainer process)")
    step_timeout: float = _positive(60.0, minimum=0, doc="seconds an env worker may take per batched call")


@dataclass
class RolloutConfig:
    tasks_per_update: int = _positive(16)
    group_size: int = _positive(8)
    temperature: float = _positive(1.0, minimum=0)
    max_response_tokens: int = _positive(512)
    max_prompt_tokens: int = _positive(2048)
    invalid_penalty: float = _positive(0.1, minimum=0)
    success_reward: float = _positive(10.0, minimum=0)
    generation_batch_size: int = _positive(64)


@dataclass
class GenerationConfig:
    """Who decodes rollouts, analyses and teacher re-scores: the trainer's own model, or Ray actors with replicas."""

    backend: str = _choice("hf", "hf", "vllm", doc="vllm needs a GPU and `pip install vllm`")
    workers: int = _positive(0, minimum=0, doc="Ray generation actors (0 = the trainer process decodes)")
    gpu_memory_utilization: float = _positive(0.3, minimum=0, maximum=1, doc="vllm: share of GPU memory")
    gpus_per_worker: float = _positive(1.0, minimum=0, doc="GPUs Ray gives each generation actor (cuda only)")


@dataclass
class DistConfig:
    """Where the pieces run. Defaults: one process, no Ray."""

    ray_address: str = ""  # "" = a local Ray cluster when any workers are asked for; "auto" or host:port to join one
    train_processes: int = _positive(1, doc="FSDP2 data-parallel processes for the RL stage (gloo on CPU, NCCL on GPU)")


@dataclass
class AlgoConfig:
    advantage: str = _choice("grpo", "grpo", "gigpo")
    norm: str = _choice("mean_std", "mean_std", "mean")
    gigpo_step_weight: float = 1.0
    gigpo_gamma: float = 0.95
    clip: float = _positive(0.2, minimum=0)
    kl_coef: float = _positive(0.01, minimum=0)
    entropy_coef: float = _positive(0.001, minimum=0)
    lr: float = _positive(1e-6, minimum=0)
    weight_decay: float = _positive(0.01, minimum=0)
    grad_clip: float = _positive(1.0, minimum=0)
    mini_batches: int = _positive(1, doc="optimizer steps per update (one PPO epoch over the batch)")
    token_budget: int = _positive(8192, doc="padded tokens per micro-batch")


@dataclass
class DistillConfig:
    """On-policy distillation added to the RL loss (SEED and its peers). kind=none is plain GRPO/GiGPO."""

    kind: str = _choice("none", "none", "seed", "opsd", "positive", "skill_sd", "opid")
    coef: float = _positive(0.01, minimum=0, doc="lambda: weight of the distillation loss")
    beta: float = _positive(5.0, minimum=0, doc="gate sharpness: g = sigmoid(beta * delta)")
    opid_weight: float = _positive(0.001, minimum=0, doc="opid: A += w * delta per token")
    skill_source: str = _choice("policy", "policy", "teacher", "library", "privileged",
                                doc="privileged = OPSD: the expert's solution as teacher context")
    teacher: str = _choice("oracle", "oracle", doc="external analyzer for skill_source=teacher")
    library_path: str = ""
    teacher_weights: str = _choice("live", "live", "base", "ema")
    ema_decay: float = _positive(0.99, minimum=0)
    analyzer_max_new_tokens: int = _positive(256)
    step_skills: int = _positive(0, minimum=0, doc="OPID-style: up to K step skills per episode (0 = off)")


@dataclass
class LabelConfig:
    """`seed label`: roll out the base policy (no skill) on training tasks; a teacher labels every episode."""

    teacher: str = _choice("oracle", "oracle", "openai")
    tasks: int = _positive(180)
    group_size: int = _positive(8)
    temperature: float = _positive(0.4, minimum=0)
    openai: dict = field(default_factory=lambda: {"base_url": "", "model": "", "api_key": "", "max_concurrency": 4,
                                                  "retries": 4, "timeout": 120})


@dataclass
class SftConfig:
    """`seed sft`: analyzer warm-up on (analysis prompt -> JSON), response-only NLL."""

    enabled: bool = False
    epochs: int = _positive(3)
    lr: float = _positive(5e-6, minimum=0)
    batch_size: int = _positive(8)
    holdout: float = _positive(0.1, minimum=0)
    eval_generations: int = _positive(16, minimum=0, doc="held-out prompts generated greedily to measure parse rate")
    max_new_tokens: int = _positive(256)


@dataclass
class WarmupConfig:
    """Optional format warm-up: SFT on well-formed responses on train-split states.

    With expert_share=0 the action is random: it teaches the <think>/<action> format, not the task. A share p > 0
    of expert moves adds a weak behaviour-cloning prior for RL to sharpen. Off in the paper recipes.
    """

    enabled: bool = False
    episodes: int = _positive(32)
    epochs: int = _positive(1)
    lr: float = _positive(1e-4, minimum=0)
    expert_share: float = _positive(0.0, minimum=0, maximum=1,
                                    doc="share of demonstration steps that take the expert's move")
    thought: str = _choice("fixed", "fixed", "observation",
                           doc="the <think> text: a fixed phrase or the situation restated")


@dataclass
class TrainConfig:
    updates: int = _positive(150)
    checkpoint_every: int = _positive(10)
    keep_checkpoints: int = _positive(2)


@dataclass
class EvalConfig:
    episodes: int = _positive(64, doc="panel size per split")
    splits: list[str] = field(default_factory=lambda: ["valid_seen", "valid_unseen"])
    temperature: float = 0.4
    every: int = _positive(0, minimum=0, doc="evaluate every N updates (0 = only before and after training)")


@dataclass
class Config:
    run_dir: str = "runs/default"
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    label: LabelConfig = field(default_factory=LabelConfig)
    sft: SftConfig = field(default_factory=SftConfig)
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _set(obj: Any, dotted: str, value: Any, path: str = "") -> None:
    head, _, rest = dotted.partition(".")
    full = f"{path}{head}"
    names = {f.name for f in dataclasses.fields(obj)}
    if head not in names:
        raise ConfigError(f"unknown config key {full!r}; allowed: {', '.join(sorted(names))}")
    current = getattr(obj, head)
    if rest:
        if dataclasses.is_dataclass(current):
            _set(current, rest, value, full + ".")
        elif isinstance(current, dict) or current is None:
            d = dict(current or {})
            d[rest] = value
            setattr(obj, head, d)
        else:
            raise ConfigError(f"config key {full!r} has no sub-keys")
    elif dataclasses.is_dataclass(current):
        if not isinstance(value, dict):
            raise ConfigError(f"config key {full!r} must be a mapping")
        for k, v in value.items():
            _set(current, k, v, full + ".")
    else:
        setattr(obj, head, value)


def _validate(obj: Any, path: str = "") -> None:
    for f in dataclasses.fields(obj):
        key, value = f"{path}{f.name}", getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            _validate(value, key + ".")
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigError(f"config key {key!r} must be true or false; got {value!r}")
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            if isinstance(value, str):  # YAML reads "1e-6" as a string
                try:
                    value = float(value)
                except ValueError:
                    pass
                setattr(obj, f.name, value)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"config key {key!r} must be a number; got {value!r}")
            if isinstance(default, int) and not isinstance(default, bool) and float(value) != int(value):
                raise ConfigError(f"config key {key!r} must be an integer; got {value!r}")
            setattr(obj, f.name, int(value) if isinstance(default, int) else float(value))
        choices = f.metadata.get("choices")
        if choices and value not in choices:
            raise ConfigError(f"config key {key!r} = {value!r} is not allowed; allowed: {', '.join(map(str, choices))}")
        minimum = f.metadata.get("min")
        if minimum is not None and value < minimum:
            raise ConfigError(f"config key {key!r} = {value!r} must be >= {minimum}")
        maximum = f.metadata.get("max")
        if maximum is not None and value > maximum:
            raise ConfigError(f"config key {key!r} = {value!r} must be <= {maximum}")


def _parse_value(text: str) -> Any:
    return yaml.safe_load(text) if text != "" else ""


def resolve_config_path(name: str | None) -> Path | None:
    """A path, or the name of a shipped config (`default`, `tiny`, ...)."""
    if name is None:
        return None
    p = Path(name)
    if p.exists():
        return p
    shipped = CONFIG_DIR / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    if shipped.exists():
        return shipped
    options = sorted(x.stem for x in CONFIG_DIR.glob("*.yaml"))
    raise ConfigError(f"config file {name!r} not found; shipped configs: {', '.join(options)}")


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Defaults <- YAML file (after the file it names as `base`, if any) <- `key=value` overrides; then validation."""
    cfg = Config()
    if path is not None:
        _apply_file(cfg, str(path), [])
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key=value (e.g. train.updates=10)")
        k, v = item.split("=", 1)
        _set(cfg, k.strip(), _parse_value(v.strip()))
    _validate(cfg)
    if cfg.env.name == "alfworld" and cfg.env.task_types:
        from seed.envs.alfworld.generator import TASK_TYPES

        bad = [t for t in cfg.env.task_types if t not in TASK_TYPES]
        if bad:
            raise ConfigError(f"config key 'env.task_types' has unknown {bad}; allowed: {', '.join(TASK_TYPES)}")
    if cfg.distill.kind != "none" and cfg.distill.skill_source == "library" and not cfg.distill.library_path:
        raise ConfigError("config key 'distill.library_path' is required when distill.skill_source is 'library'")
    if cfg.dist.train_processes > 1:
        for key, bad, why in (("distill.teacher_weights", cfg.distill.teacher_weights == "ema", "live, base"),
                              ("model.lora", bool(cfg.model.lora), "null")):
            if bad:
                raise ConfigError(f"config key {key!r} is not supported with dist.train_processes > 1; allowed: {why}")
    if cfg.generation.backend == "vllm" and cfg.model.device != "cuda":
        raise ConfigError("config key 'generation.backend' = 'vllm' needs model.device = 'cuda'; allowed on cpu: hf")
    bad_splits = [s for s in cfg.eval.splits if s not in ("train", "valid_seen", "valid_unseen")]
    if bad_splits:
        raise ConfigError(f"config key 'eval.splits' has unknown {bad_splits}; allowed: train, valid_seen, valid_unseen")
    return cfg


def _apply_file(cfg: Config, name: str, chain: list[Path]) -> None:
    p = resolve_config_path(name).resolve()
    if p in chain:
        raise ConfigError(f"config key 'base': {' -> '.join(map(str, chain + [p]))} is a cycle")
    data = yaml.safe_load(p.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping")
    if "base" in data:
        _apply_file(cfg, str(data.pop("base")), chain + [p])
    for k, v in data.items():
        _set(cfg, k, v)


def save_config(cfg: Config, path: Path) -> None:
    path.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
