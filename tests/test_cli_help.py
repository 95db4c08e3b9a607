"""`--help` of every `orchrm` command and group on an 80-column terminal: no line wider,
every option's full name shown unbroken, no value shown for a flag, options grouped in
the panels their config fields declare, and the command list one sentence a command."""

from __future__ import annotations

import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from orchrm.cli import app
from tests.conftest import every_command

COMMANDS = list(every_command(get_command(app)))


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(p) or "orchrm" for p, _ in COMMANDS]
)
def test_help_fits_80_columns_and_shows_every_option_whole(path, command):
    result = CliRunner(env={"COLUMNS": "80"}).invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    text = result.output
    too_wide = [line for line in text.splitlines() if len(line) > 80]
    assert too_wide == []
    for param in command.params:
        if getattr(param, "hidden", False) or param.param_type_name != "option":
            continue
        for name in [*param.opts, *param.secondary_opts]:
            assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), name
        if param.is_flag:
            shown = re.search(rf"(?<![\w-]){re.escape(param.opts[-1])}(?![\w-])(.*)", text)
            assert not shown.group(1).startswith((" INT", " TEXT", " BOOL", " <")), name
        if param.param_type_name == "option" and not param.is_flag:
            assert param.help, name
    assert "<bool>" not in text and "…" not in text


def test_train_options_are_grouped_by_what_they_set():
    text = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["train", "--help"]).output
    panels = re.findall(r"^(\w[\w ]*):$", text, flags=re.M)
    assert panels == ["Options", "Data", "Model", "Optimization", "Ensemble", "Scale", "Output"]
    data = text.split("\nData:\n")[1].split("\n\n")[0]
    assert "--pairs" in data and "--lr" not in data


def test_the_command_list_is_one_sentence_per_command_on_wrapped_lines():
    text = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["--help"]).output
    listed = text.split("\nCommands:\n")[1]
    assert "  ingest          Ingest logs into the store.\n" in listed
