"""ALFWorld: the official text engine over the project's generated problems (or the official data)."""

from seed.envs.alfworld.env import AlfworldEnv
from seed.envs.alfworld.generator import TASK_TYPES, generate_problem

__all__ = ["AlfworldEnv", "TASK_TYPES", "generate_problem"]
