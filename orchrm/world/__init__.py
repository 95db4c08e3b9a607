"""The controlled world: an offline benchmark with ground truth, run through the real
executor (tasks, the success model, the simulated backend, the orchestrators, logs)."""
