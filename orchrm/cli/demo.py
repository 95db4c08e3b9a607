"""`orchrm demo`: the whole story offline, from world logs to a best-of-8 report."""

from __future__ import annotations

from pathlib import Path

from orchrm.cli.console import console, csv_values
from orchrm.cli.options import config_options
from orchrm.configs import dump_config
from orchrm.experiments.demo.config import DemoConfig


@config_options(DemoConfig, settings={"presets": {"parser": csv_values, "spell": ",".join}})
def demo_command(config: DemoConfig) -> None:
    """The whole story offline: world logs -> store -> pairs -> reward models -> best-of-8
    against every selector on held-out tasks -> report in OUT (OUT/config.yaml holds the
    settings, for `--config` to repeat the run)."""
    from orchrm.experiments.demo.run import run_demo

    dump_config(config, Path(config.out) / "config.yaml")
    run_demo(config, say=lambda m: console.print(m, highlight=False, markup=False, soft_wrap=True))
