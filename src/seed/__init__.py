"""seed: SEED (self-evolving on-policy distillation) and outcome-RL baselines for multi-turn LLM agents."""
__version__ = "0.1.0"
