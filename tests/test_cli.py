"""The `orchrm` command, run as a real process the way users run it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.test_parse import DATA, HIGH_DOM

ORCHRM = Path(sys.executable).with_name("orchrm")


def test_version(orchrm_cli):
    result = orchrm_cli("--version")
    assert result.returncode == 0 and result.stdout.startswith("orchrm ")


def test_parse_prints_the_table_for_the_real_files(orchrm_cli):
    files = sorted(DATA.glob("*.jsonl"))
    if not files:
        pytest.skip(f"{DATA} is absent: the shared data folder is not beside this checkout")
    result = orchrm_cli("parse", *map(str, files))
    assert result.returncode == 0, result.stderr
    total = next(line for line in result.stdout.splitlines() if "total" in line)
    assert [int(x) for x in total.replace("│", " ").split()[1:]] == [84, 53, 0, 31]
    for reason in ("no_agents", "no_final_channel", "empty"):
        assert reason in result.stdout


def test_parse_json_and_details_account_for_every_record(tmp_path, orchrm_cli):
    log = tmp_path / "log.jsonl"
    cyclic = HIGH_DOM.replace("<to>Solve</to>", "<to>Solve</to><from>Solve</from><to>Parse</to>")
    log.write_text(
        "\n".join([json.dumps({"full_response": HIGH_DOM}), json.dumps({"text": cyclic}), "{bad"])
    )
    out = json.loads(orchrm_cli("parse", str(log), "--json").stdout)
    (summary,) = out["files"]
    assert (summary["records"], summary["valid"], summary["invalid"]) == (3, 1, 1)
    assert summary["unparseable_by_reason"] == {"invalid_json": 1}
    assert "cycle" in summary["invalid_by_rule"]
    details = orchrm_cli("parse", str(log), "--details").stdout
    assert f"{log}:2: invalid" in details and f"{log}:3: unparseable invalid_json" in details


def test_parse_missing_file_fails_clearly_and_the_others_are_still_counted(tmp_path, orchrm_cli):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"full_response": HIGH_DOM}) + "\n")
    result = orchrm_cli("parse", str(tmp_path / "nope.jsonl"), str(log), "--json")
    assert result.returncode == 1 and "no such file" in result.stderr
    out = json.loads(result.stdout)
    assert [(s["path"], s["valid"]) for s in out["files"]] == [(str(log), 1)]
    assert out["unreadable"] == [
        {"path": str(tmp_path / "nope.jsonl"), "error": f"no such file: {tmp_path / 'nope.jsonl'}"}
    ]
