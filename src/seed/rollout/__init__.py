"""Multi-turn rollouts: groups of episodes that share an initial state."""

from seed.types import Episode, StepSample, StepState

__all__ = ["Episode", "StepSample", "StepState"]
