"""`GenerateConfig` and `WorldStatsConfig`: what `orchrm world generate` and `orchrm world
stats` can set (kept apart from the world's code so the command line reads them without
loading it)."""

from __future__ import annotations

from orchrm.configs import config, setting


@config
class GenerateConfig:
    """Which world logs `generate` writes, how many, and where."""

    preset: str = "math"
    """math, search, multihop or science."""
    num_tasks: int = setting(300, min=1)
    """World tasks to generate."""
    samples: int = setting(8, min=1)
    """Samples per task per orchestrator."""
    seed: int = 0
    """Seeds the tasks and every sample."""
    out: str = "runs/world"
    """Folder for the logs."""


@config
class WorldStatsConfig:
    """Which presets `world_stats` measures, on how many tasks and samples."""

    presets: str = "math,search,multihop,science"
    """Comma-separated world presets."""
    num_tasks: int = setting(GenerateConfig.num_tasks, min=1)
    """World tasks per preset."""
    samples: int = setting(GenerateConfig.samples, min=2)
    """N: samples per task."""
    seed: int = GenerateConfig.seed
    """Seeds the tasks and every sample."""
