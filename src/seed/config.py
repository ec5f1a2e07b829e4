"""One typed config: documented dataclasses, YAML files, dotted `key=value` overrides, validation up front.

Every error names the key and the allowed values, and is raised before any work starts.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from seed.algos import ADVANTAGES, DISTILL_LOSSES, GROUPINGS, INVALID_ADVANTAGES, NORMS, POLICY_LOSSES
from seed.errors import ConfigError
from seed.skills import SKILL_SOURCES

OLD_LOGPROBS = ("recompute", "rollout", "auto")  # the PPO ratio's denominator (AlgoConfig.old_logprobs)

CONFIG_DIR = Path(__file__).resolve().parent / "configs"  # package data (the repo's configs/ links here)


def _choice(default: Any, *choices: Any, doc: str = "") -> Any:
    return field(default=default, metadata={"choices": choices, "doc": doc})


def _positive(default: Any, doc: str = "", minimum: float = 1, maximum: float | None = None) -> Any:
    return field(default=default, metadata={"min": minimum, "max": maximum, "doc": doc})


@dataclass
class ModelConfig:
    name: str = "smollm2-135m-instruct"  # bundled SmolLM2, "tiny-random(-vl)", or any HF path / hub id
    device: str = _choice("cpu", "cpu", "cuda")
    precision: str = _choice("auto", "auto", "bf16", "fp32", doc="auto = bf16 autocast where the hardware has it")
    lora: dict | None = None  # e.g. {r: 16, lora_alpha: 32, target_modules: [q_proj, v_proj]}
    activation_checkpointing: bool = _choice(
        False,
        False,
        True,
        doc="training forwards keep each decoder layer's input only and recompute "
        "the rest in backward: less memory, more compute; same gradients",
    )
    offload_reference: bool = _choice(
        False,
        False,
        True,
        doc="free the KL reference's weights after each use and read them back from "
        "reference.pt for the next: the phases between run without them",
    )


@dataclass
class EnvConfig:
    name: str = "alfworld"  # a registered env (`seed envs`): alfworld, sokoban, or one a user registered
    max_steps: int = _positive(30)
    history_length: int = _positive(5, minimum=0)
    kwargs: dict = field(default_factory=dict)  # passed to the env constructor (alfworld: task_types, num_receptacles)
    workers: int = _positive(0, minimum=0, doc="Ray env actors (0 = envs in the trainer process)")
    step_timeout: float = _positive(60.0, minimum=0, doc="seconds an env worker may take per batched call")


@dataclass
class RolloutConfig:
    tasks_per_update: int = _positive(16)
    group_size: int = _positive(8)
    temperature: float = _positive(1.0, minimum=0)
    max_response_tokens: int = _positive(512, maximum=32768)
    max_prompt_tokens: int = _positive(2048, maximum=1_048_576)
    invalid_penalty: float = _positive(0.1, minimum=0)
    success_reward: float = _positive(10.0, minimum=0)
    generation_batch_size: int = _positive(64)
    validity: str = _choice(
        "format",
        "format",
        "admissible",
        doc="format (official): invalid only without the <think>/<action> pair or with CJK text; "
        "a well-formed inadmissible action goes to the env unpenalised. admissible: also "
        "invalid when the action is not admissible (it is then not sent)",
    )
    stop_at_action: bool = field(
        default=False,
        metadata={"doc": "end responses at </action> instead of generating (and training) the end-of-turn token"},
    )


@dataclass
class GenerationConfig:
    """Who decodes rollouts, analyses and teacher re-scores: the trainer's own model, or Ray actors with replicas."""

    backend: str = _choice("hf", "hf", "vllm", doc="vllm needs a GPU and `pip install vllm`")
    workers: int = _positive(0, minimum=0, doc="Ray generation actors (0 = the trainer process decodes)")
    gpu_memory_utilization: float = _positive(0.3, minimum=0, maximum=1, doc="vllm: share of GPU memory")
    gpus_per_worker: float = _positive(1.0, minimum=0, doc="GPUs Ray gives each generation actor (cuda only)")
    max_model_len: int = _positive(
        0,
        minimum=0,
        doc="vllm: context length; 0 = rollout prompt + response or "
        "analysis prompt + analyzer tokens, whichever is longer",
    )


@dataclass
class DistConfig:
    """Where the pieces run. Defaults: one process, no Ray."""

    ray_address: str = ""  # "" = a local Ray cluster when any workers are asked for; "auto" or host:port to join one
    train_processes: int = _positive(1, doc="FSDP2 data-parallel processes for the RL stage (gloo on CPU, NCCL on GPU)")


@dataclass
class AlgoConfig:
    advantage: str = _choice("grpo", *ADVANTAGES)
    grpo_over: str = _choice(
        "steps",
        *GROUPINGS,
        doc="steps (official): every step sample has its own score and "
        "the group statistics run over step samples; episodes: one score per episode",
    )
    norm: str = _choice("mean_std", *NORMS)
    invalid_advantage: str = _choice(
        "keep",
        *INVALID_ADVANTAGES,
        doc="keep (official): an invalid step of a won episode keeps its positive advantage; nonpositive: an invalid "
        "step's advantage is capped at 0, so a response that broke the answer format is never reinforced",
    )
    gigpo_step_weight: float = _positive(1.0, minimum=0)
    gigpo_gamma: float = _positive(0.95, minimum=0, maximum=1)
    policy_loss: str = _choice("ppo_clip", *POLICY_LOSSES)
    clip: float = _positive(0.2, minimum=0)
    clip_ratio_c: float = _positive(3.0, minimum=0, doc="dual clip for negative advantages (0 = off); must be > 1")
    kl_coef: float = _positive(0.01, minimum=0)
    entropy_coef: float = _positive(0.001, minimum=0)
    lr: float = _positive(1e-6, minimum=0)
    weight_decay: float = _positive(0.01, minimum=0)
    grad_clip: float = _positive(1.0, minimum=0)
    mini_batch_size: int = _positive(
        256,
        minimum=0,
        doc="step samples per optimizer step (one PPO epoch over the batch; 0 = the whole batch in one step)",
    )
    pad_mini_batches: bool = field(
        default=True,
        metadata={
            "doc": "fill the last mini-batch with step samples drawn again at random (official), or leave it short"
        },
    )
    token_budget: int = _positive(8192, doc="padded tokens per micro-batch")
    old_logprobs: str = _choice(
        "recompute",
        *OLD_LOGPROBS,
        doc="the PPO ratio's denominator with several mini-batches: recompute (official) runs a no-grad pass of the "
        "policy over the batch; rollout takes the sampler's own log-probs of the same weights; auto takes them where "
        "they equal a recompute up to fp32 rounding (the trainer decodes its rollouts itself, without autocast)",
    )


@dataclass
class DistillConfig:
    """On-policy distillation added to the RL loss (SEED and its peers). kind=none is plain GRPO/GiGPO."""

    kind: str = _choice("none", "none", *DISTILL_LOSSES)
    coef: float = _positive(0.01, minimum=0, doc="lambda: weight of the distillation loss")
    beta: float = _positive(5.0, minimum=0, doc="gate sharpness: g = sigmoid(beta * delta)")
    opid_weight: float = _positive(0.001, minimum=0, doc="opid: A += w * delta per token")
    skill_source: str = _choice(
        "policy",
        *SKILL_SOURCES,
        doc="privileged = OPSD: the expert's solution as teacher context; sibling: another "
        "successful episode of the same group",
    )
    teacher: str = _choice("oracle", "oracle", doc="external analyzer for skill_source=teacher")
    library_path: str = ""  # skill_source library: a YAML/JSON file of {task_type: skill}, or a shipped name (sokoban)
    teacher_weights: str = _choice("live", "live", "base", "ema")
    ema_decay: float = _positive(0.99, minimum=0, maximum=1)
    analyzer_max_new_tokens: int = _positive(256, maximum=32768)
    analyzer_batch_size: int = _positive(
        16,
        doc="analyses decoded together: their prompts are whole episodes, so "
        "the K/V cache of a batch, not the weights, sets the memory peak",
    )
    analyzer_max_prompt_tokens: int = _positive(
        16384, maximum=1_048_576, doc="token budget of the analysis prompt's trajectory"
    )
    min_skill_words: int = _positive(1, doc="shorter skills are unusable (official RL path: any non-empty skill)")
    step_skills: int = _positive(0, minimum=0, doc="OPID-style: up to K step skills per episode (0 = off)")
    skill_first: bool = field(
        default=False,
        metadata={
            "doc": "the analysis asks for episode_skill before episode_summary (official: summary first); a small "
            "analyzer otherwise copies the summary it has just written into the skill"
        },
    )
    expert_signal: bool = field(
        default=True,
        metadata={"doc": "replay each episode next to the env's expert (where it has one) for the skill-lift metrics"},
    )


@dataclass
class OpenAIConfig:
    """An OpenAI-compatible chat-completions endpoint as the labelling teacher. The key is read from the environment
    variable `api_key_env` or from `api_key_file`; a key written here is used but never saved (redacted)."""

    base_url: str = ""
    model: str = ""
    api_key: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    api_key_file: str = ""
    max_concurrency: int = _positive(4)
    retries: int = _positive(4, minimum=0, doc="retries of a transient failure (connection, timeout, 5xx, bad body)")
    timeout: float = _positive(120.0, minimum=0.001, doc="seconds one attempt may take, end to end")
    deadline: float = _positive(600.0, minimum=0.001, doc="seconds one request may take, all attempts together")
    backoff: float = _positive(1.0, minimum=0, doc="first retry delay in seconds; doubles every retry")


@dataclass
class LabelConfig:
    """`seed label`: roll out the base policy (no skill) on training tasks; a teacher labels every episode."""

    teacher: str = _choice("oracle", "oracle", "openai")
    tasks: int = _positive(180)
    group_size: int = _positive(8)
    temperature: float = _positive(0.4, minimum=0)
    max_failed_share: float = _positive(
        0.25, minimum=0, maximum=1, doc="labelling fails as a stage only when more episodes than this fail"
    )
    openai: OpenAIConfig = field(default_factory=OpenAIConfig)


@dataclass
class SftConfig:
    """`seed sft`: analyzer warm-up on (analysis prompt -> JSON), response-only NLL."""

    enabled: bool = False
    epochs: int = _positive(3)
    lr: float = _positive(5e-6, minimum=0)
    batch_size: int = _positive(8)
    weight_decay: float = _positive(0.01, minimum=0)
    adam_beta1: float = _positive(0.9, minimum=0, maximum=0.999999)
    adam_beta2: float = _positive(0.95, minimum=0, maximum=0.999999)
    warmup_ratio: float = _positive(
        0.1, minimum=0, maximum=1, doc="share of the steps with a linear lr warm-up; cosine decay to 0 after it"
    )
    holdout: float = _positive(0.1, minimum=0, maximum=0.9, doc="share of labels held out")
    eval_generations: int = _positive(16, minimum=0, doc="held-out prompts generated greedily to measure parse rate")
    max_new_tokens: int = _positive(256, maximum=32768)
    failures_per_success: float = _positive(
        0.0,
        minimum=0,
        doc="train on at most this many failure labels per "
        "success label (the rest are dropped, by episode id); 0 keeps all",
    )
    skill_weight: float = _positive(
        1.0,
        minimum=1,
        maximum=100,
        doc="the episode_skill's tokens weigh this many "
        "times in the analyzer SFT's token mean (1: the official plain token mean); the "
        "skill is what SEED's teacher reads, and its opener one token in a ~70-token target",
    )
    token_budget: int = _positive(
        0,
        minimum=0,
        doc="padded tokens per micro-batch of the analyzer SFT (0: "
        "algo.token_budget); its transcripts are the longest sequences a run trains on, so "
        "its micro-batches set the memory peak, not its optimizer step (gradients add up)",
    )
    format_replay: bool = _choice(
        False,
        False,
        True,
        doc="every batch also carries some of the format warm-up's demonstrations (needs "
        "warmup.enabled): a small model that learns to analyse at a high lr otherwise "
        "forgets how to act; off in the paper recipes",
    )


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
    expert_share: float = _positive(
        0.0, minimum=0, maximum=1, doc="share of demonstration steps that take the expert's move"
    )
    thought: str = _choice(
        "fixed", "fixed", "observation", doc="the <think> text: a fixed phrase or the situation restated"
    )
    skill_share: float = _positive(
        0.0,
        minimum=0,
        maximum=1,
        doc="share of demonstration episodes whose prompts carry a skill (oracle "
        "wording) that names their moves: skill following; off in the paper recipes",
    )
    foreign_skill_share: float = _positive(
        0.0,
        minimum=0,
        maximum=1,
        doc="share of the skill-carrying demonstrations whose skill was written "
        "for another room: its rules bind only the situations they name",
    )
    action_weight: float = _positive(
        1.0,
        minimum=1,
        maximum=100,
        doc="weight of the action's tokens in the warm-up loss, relative to the rest of "
        "the response (1 = a plain token mean)",
    )


@dataclass
class TrainConfig:
    updates: int = _positive(150)
    checkpoint_every: int = _positive(10)
    keep_checkpoints: int = _positive(2)
    max_skipped_steps: int = _positive(3, doc="stop after this many consecutive optimizer steps skipped for NaN/inf")


@dataclass
class EvalConfig:
    episodes: int = _positive(64, doc="panel size per split")
    splits: list[str] = field(default_factory=lambda: ["valid_seen", "valid_unseen"])
    temperature: float = _positive(0.4, minimum=0)
    every: int = _positive(0, minimum=0, doc="evaluate every N updates (0 = only before and after training)")


@dataclass
class WandbConfig:
    """Weights & Biases, optional (`pip install wandb`): the metrics of metrics.jsonl, the eval panels and, per
    update, a table of sampled episodes with their skills, in one W&B run per run directory. Off while `project` is
    empty. `offline` writes under RUN_DIR/wandb with no network (`wandb sync` uploads it later); the API key is
    wandb's own (WANDB_API_KEY or `wandb login`) and seed never writes it."""

    project: str = ""
    entity: str = ""
    mode: str = _choice("offline", "offline", "online", "disabled")
    episodes: int = _positive(16, minimum=0, doc="episodes per update in the episode table, spread over the groups")


@dataclass
class LoggingConfig:
    tensorboard: bool = True
    wandb: WandbConfig = field(default_factory=WandbConfig)


@dataclass
class Config:
    run_dir: str = "runs/default"
    seed: int = _positive(0, minimum=0, maximum=2**32 - 1)
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
    logging: LoggingConfig = field(default_factory=LoggingConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _set(obj: Any, dotted: str, value: Any, path: str = "") -> None:
    head, _, rest = str(dotted).partition(".")
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
            raise ConfigError(f"config key {full!r} must be a mapping; got {value!r}")
        for k, v in value.items():
            _set(current, k, v, full + ".")
    else:
        setattr(obj, head, value)


def _validate(obj: Any, path: str = "") -> None:
    """Types, finiteness, choices and ranges of every field, from the dataclasses' declarations."""
    for f in dataclasses.fields(obj):
        key, value = f"{path}{f.name}", getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            _validate(value, key + ".")
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        value = _checked_type(key, value, default, str(f.type))
        setattr(obj, f.name, value)
        choices = f.metadata.get("choices")
        if choices and value not in choices:
            raise ConfigError(f"config key {key!r} = {value!r} is not allowed; allowed: {', '.join(map(str, choices))}")
        minimum = f.metadata.get("min")
        if minimum is not None and value < minimum:
            raise ConfigError(f"config key {key!r} = {value!r} must be >= {minimum}")
        maximum = f.metadata.get("max")
        if maximum is not None and value > maximum:
            raise ConfigError(f"config key {key!r} = {value!r} must be <= {maximum}")


def _checked_type(key: str, value: Any, default: Any, annotation: str) -> Any:
    """`value` as the field's type (YAML reads "1e-6" as a string: numbers are converted), or a ConfigError."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"config key {key!r} must be true or false; got {value!r}")
    elif isinstance(default, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"config key {key!r} must be a number; got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"config key {key!r} must be a finite number; got {value!r}")
        if isinstance(default, int) and float(value) != int(value):
            raise ConfigError(f"config key {key!r} must be an integer; got {value!r}")
        value = int(value) if isinstance(default, int) else float(value)
    elif isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"config key {key!r} must be a string; got {value!r}")
    elif annotation.startswith("list"):
        if not (value is None and "None" in annotation) and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            raise ConfigError(f"config key {key!r} must be a list of strings; got {value!r}")
    elif annotation.startswith("dict"):
        if not (value is None and "None" in annotation) and not isinstance(value, dict):
            raise ConfigError(
                f"config key {key!r} must be a mapping{' or null' if 'None' in annotation else ''}; got {value!r}"
            )
    return value


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses a key written twice in one mapping (YAML would silently keep the last)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, f"unhashable key {key!r}", key_node.start_mark
                ) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep)


def _yaml(text: str, where: str) -> Any:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"{where} is not valid YAML: {detail[:300]}") from None


def _parse_value(text: str, item: str) -> Any:
    return _yaml(text, f"override {item!r}") if text != "" else ""


def resolve_config_path(name: str | None, relative_to: Path | None = None) -> Path | None:
    """A path (relative to `relative_to`'s folder when given, as `base:` is), or a shipped config name."""
    if name is None:
        return None
    name = str(name)
    p = Path(name).expanduser()
    if relative_to is not None and not p.is_absolute() and (relative_to.parent / p).exists():
        return relative_to.parent / p
    if p.exists():
        return p
    shipped = CONFIG_DIR / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    if shipped.exists():
        return shipped
    options = sorted(x.stem for x in CONFIG_DIR.glob("*.yaml"))
    raise ConfigError(f"config file {name!r} not found; shipped configs: {', '.join(options)}")


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Defaults <- YAML file (after the file it names as `base`, if any) <- `key=value` overrides; then validation
    of every value and of what the values name (files, envs, models), before anything is written."""
    cfg = Config()
    if path is not None:
        _apply_file(cfg, str(path), [])
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key=value (e.g. train.updates=10)")
        k, v = item.split("=", 1)
        _set(cfg, k.strip(), _parse_value(v.strip(), item))
    _validate(cfg)
    _check_references(cfg)
    return cfg


def _check_wandb(w: WandbConfig) -> None:
    if w.project and w.mode != "disabled" and importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            f"config key 'logging.wandb.project' = {w.project!r} logs to W&B, but the wandb package is "
            f"not installed: `pip install wandb`, or set logging.wandb.project='' (allowed: any "
            f"project name with wandb installed, or '' for no W&B)"
        )


def _check_references(cfg: Config) -> None:
    """What the values point at: env names and constructor arguments, task types, files, the model, the teacher."""
    if not cfg.run_dir.strip():
        raise ConfigError("config key 'run_dir' must name a directory; got ''")
    if Path(cfg.run_dir).exists() and not Path(cfg.run_dir).is_dir():
        raise ConfigError(f"config key 'run_dir' = {cfg.run_dir!r} is a file, not a directory")
    _check_model(cfg.model)
    _check_env(cfg.env)
    _check_wandb(cfg.logging.wandb)
    if cfg.sft.enabled and cfg.sft.format_replay and not cfg.warmup.enabled:
        raise ConfigError(
            "config key 'sft.format_replay' = true replays the format warm-up's demonstrations; it needs "
            "warmup.enabled = true (allowed otherwise: false)"
        )
    d = cfg.distill
    if d.kind != "none" and d.skill_source == "library":
        if not d.library_path:
            raise ConfigError("config key 'distill.library_path' is required when distill.skill_source is 'library'")
        from seed.skills.library import SHIPPED_LIBRARIES, library_file, read_skill_library

        if not library_file(d.library_path).is_file():
            shipped = ", ".join(sorted(p.stem for p in SHIPPED_LIBRARIES.glob("*.yaml")))
            raise ConfigError(
                f"config key 'distill.library_path' = {d.library_path!r}: no such file, and no "
                f"shipped library of that name (shipped: {shipped})"
            )

        read_skill_library(d.library_path)
    if cfg.dist.train_processes > 1:
        for key, bad, why in (
            ("distill.teacher_weights", d.teacher_weights == "ema", "live, base"),
            ("model.lora", bool(cfg.model.lora), "null"),
        ):
            if bad:
                raise ConfigError(f"config key {key!r} is not supported with dist.train_processes > 1; allowed: {why}")
    if cfg.generation.backend == "vllm" and cfg.model.device != "cuda":
        raise ConfigError("config key 'generation.backend' = 'vllm' needs model.device = 'cuda'; allowed on cpu: hf")
    if not cfg.eval.splits:
        raise ConfigError(
            "config key 'eval.splits' must name at least one split; allowed: train, valid_seen, valid_unseen"
        )
    bad_splits = [s for s in cfg.eval.splits if s not in ("train", "valid_seen", "valid_unseen")]
    if bad_splits:
        raise ConfigError(
            f"config key 'eval.splits' has unknown {bad_splits}; allowed: train, valid_seen, valid_unseen"
        )
    o = cfg.label.openai
    if cfg.label.teacher == "openai":
        for key in ("base_url", "model"):
            if not getattr(o, key):
                raise ConfigError(f"config key 'label.openai.{key}' is required when label.teacher is 'openai'")
        if not o.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"config key 'label.openai.base_url' = {o.base_url!r} must start with http:// or https://"
            )
    if o.api_key_file and not Path(o.api_key_file).expanduser().is_file():
        raise ConfigError(f"config key 'label.openai.api_key_file' = {o.api_key_file!r}: no such file")


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _check_model(m: ModelConfig) -> None:
    from seed.models.load import SMOLLM2, TINY, TINY_VL

    name = m.name
    if name not in (SMOLLM2, TINY, TINY_VL) and not Path(name).expanduser().is_dir():
        if not _HUB_ID.match(name) or name.startswith((".", "~")):
            raise ConfigError(
                f"config key 'model.name' = {name!r} is neither a shipped model ({SMOLLM2}, {TINY}, {TINY_VL}), "
                f"an existing folder, nor a hub id (org/name)"
            )
    if m.lora:
        import peft

        allowed = {f.name for f in dataclasses.fields(peft.LoraConfig)} - {"task_type", "peft_type"}
        unknown = sorted(set(map(str, m.lora)) - allowed)
        if unknown:
            raise ConfigError(
                f"config key 'model.lora' has unknown {unknown}; allowed: e.g. r, lora_alpha, "
                f"lora_dropout, target_modules (peft.LoraConfig fields)"
            )


def _check_env(e: EnvConfig) -> None:
    from seed.envs.base import argument_choices, available, constructor_parameters, intro

    if ":" in e.name:  # a user's module:Class
        try:
            intro(e.name)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"config key 'env.name' = {e.name!r}: {exc}") from exc
    elif e.name not in available():
        raise ConfigError(
            f"config key 'env.name' = {e.name!r} is not registered; allowed: {', '.join(available())}, "
            "or a module:Class of your own"
        )
    params = constructor_parameters(e.name)
    unknown = sorted(set(map(str, e.kwargs)) - params) if params is not None else []
    if unknown:
        raise ConfigError(
            f"config key 'env.kwargs' has unknown {unknown} for env {e.name!r}; allowed: {', '.join(sorted(params))}"
        )
    for key, allowed in argument_choices(e.name).items():
        value = e.kwargs.get(key)
        names = [value] if isinstance(value, str) else value
        if value is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise ConfigError(
                f"config key 'env.kwargs.{key}' must be a name or a list of names; allowed: {', '.join(allowed)}"
            )
        bad = [n for n in names or [] if n not in allowed]
        if bad:
            raise ConfigError(f"config key 'env.kwargs.{key}' has unknown {bad}; allowed: {', '.join(allowed)}")


def check_runtime(cfg: Config) -> None:
    """What only this machine can say: a CUDA device, vLLM. Not part of load_config, so GPU recipes load anywhere."""
    if cfg.model.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("config key 'model.device' = 'cuda', but no CUDA device is visible here; allowed: cpu")
    if cfg.generation.backend == "vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise ConfigError("config key 'generation.backend' = 'vllm', but vllm is not installed; allowed: hf")


def _read_config_file(p: Path) -> dict:
    if p.is_dir():
        raise ConfigError(f"config file {str(p)!r} is a directory, not a YAML file")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"config file {str(p)!r} cannot be read: {exc.strerror}") from None
    data = _yaml(text, f"config file {str(p)!r}") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r}: the top level must be a mapping")
    return data


def _apply_file(cfg: Config, name: str, chain: list[Path]) -> None:
    p = resolve_config_path(name, chain[-1] if chain else None).resolve()
    if p in chain:
        raise ConfigError(f"config key 'base': {' -> '.join(map(str, chain + [p]))} is a cycle")
    data = _read_config_file(p)
    if "base" in data:
        _apply_file(cfg, str(data.pop("base")), chain + [p])
    for k, v in data.items():
        _set(cfg, k, v)


SECRET_KEYS = ("label.openai.api_key",)
REDACTED = "<redacted>"


def redacted(d: dict) -> dict:
    """A config dict with every secret value replaced, as it may be written anywhere."""
    out = copy.deepcopy(d)
    for dotted in SECRET_KEYS:
        *parents, leaf = dotted.split(".")
        node = out
        for k in parents:
            node = node.get(k, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict) and node.get(leaf):
            node[leaf] = REDACTED
    return out


def save_config(cfg: Config, path: Path) -> None:
    """The resolved config, secrets redacted, written atomically."""
    from seed.storage import atomic_write_text

    atomic_write_text(Path(path), yaml.safe_dump(redacted(cfg.to_dict()), sort_keys=False))


# Keys whose change would make the run another run (its task stream, its weights' shapes): never changed mid-run.
FIXED_KEYS = ("seed", "model.name", "model.lora", "env.name", "env.kwargs", "rollout.tasks_per_update")
# Keys that say how long, or where, a run goes on, not what it computes: may change on every resume.
FREE_KEYS = (
    "run_dir",
    "train.updates",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "env.workers",
    "env.step_timeout",
    "model.activation_checkpointing",
    "model.offload_reference",
    "model.device",
    "dist.ray_address",
    "dist.train_processes",
    "generation.backend",
    "generation.workers",
    "generation.gpu_memory_utilization",
    "generation.gpus_per_worker",
    "logging.tensorboard",
    "logging.wandb.project",
    "logging.wandb.entity",
    "logging.wandb.mode",
    "logging.wandb.episodes",
)


def flat(cfg: Config) -> dict[str, Any]:
    """Dotted key -> value for every leaf of the config (mapping-valued keys such as env.kwargs are leaves)."""
    out: dict[str, Any] = {}

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                walk(value, f"{prefix}{f.name}.")
            else:
                out[f"{prefix}{f.name}"] = value

    walk(cfg, "")
    return out


def check_resume(cfg: Config, run_dir: Path, force: bool = False) -> bool:
    """An existing run directory continues only under the config it was started with: a changed key needs
    `force` (listed in the error), a FIXED_KEYS change is never allowed. True when the saved config differs and
    `force` lets the run go on under the new one."""
    saved = Path(run_dir) / "config.yaml"
    if not saved.exists():
        return False
    try:
        old = flat(load_config(saved))
    except ConfigError as exc:
        if not force:
            raise ConfigError(f"{saved} cannot be read ({exc}); re-run with --force to replace it") from None
        return True
    new = flat(cfg)
    new = {k: (REDACTED if k in SECRET_KEYS and v else v) for k, v in new.items()}
    changed = {k: (old[k], new[k]) for k in new if k in old and old[k] != new[k] and k not in FREE_KEYS}
    if not changed:
        return False
    listing = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in sorted(changed.items()))
    fixed = sorted(k for k in changed if k in FIXED_KEYS)
    if fixed:
        raise ConfigError(
            f"run_dir {str(run_dir)!r} was started with another config, and {', '.join(fixed)} can never "
            f"change mid-run ({listing}); use a new run_dir"
        )
    if not force:
        raise ConfigError(
            f"run_dir {str(run_dir)!r} was started with another config ({listing}); re-run with --force "
            f"to continue under the new one, or use a new run_dir"
        )
    return True
