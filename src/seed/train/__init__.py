"""Training: the RL update, evaluation, checkpoints, metrics, and the optional format warm-up."""
