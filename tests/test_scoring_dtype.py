"""Every command that loads a reward model to score takes `--dtype`, defaulting to `auto`
as training does, and hands it to the loader; the docs' printed scores say which
precision they come from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from orchrm.cli import app

ROOT = Path(__file__).resolve().parents[1]
SCORING = ("score", "serve", "view", "evaluate-rm", "eval", "demo", "train")


def _commands(group, path=()):
    for name, command in getattr(group, "commands", {}).items():
        yield (*path, name), command
        yield from _commands(command, (*path, name))


def test_every_command_that_scores_takes_dtype_defaulting_to_auto():
    commands = {" ".join(p): c for p, c in _commands(typer.main.get_command(app))}
    for name in SCORING:
        (dtype,) = [p for p in commands[name].params if p.name == "dtype"]
        assert dtype.default == "auto", name


class _Loaded(Exception):
    pass


def test_view_hands_its_dtype_to_the_loader(tmp_path, monkeypatch):
    seen = {}

    def load_scorer(rm, rm_url=None, *args, dtype="auto", **kwargs):
        seen["dtype"] = dtype
        raise _Loaded

    monkeypatch.setattr("orchrm.scoring.load.load_scorer", load_scorer)
    log = tmp_path / "log.jsonl"
    log.write_text("")
    args = ["view", str(log), "--rm", str(tmp_path), "--dtype", "fp32"]
    done = CliRunner().invoke(app, args)
    assert isinstance(done.exception, _Loaded) and seen == {"dtype": "fp32"}


@pytest.mark.parametrize(
    ("doc", "printed", "says"),
    [
        ("README.md", "records scored in fp32", "These figures come from fp32"),
        ("docs/serve.md", '"score": -0.492', "trained and served in fp32"),
    ],
)
def test_printed_scores_say_their_precision(doc, printed, says):
    text = (ROOT / doc).read_text()
    assert printed in text
    after = text[text.index(printed) - 400 : text.index(printed) + 1500]
    assert says in after and re.search(r"--dtype fp32", after), doc
