"""orchrm.jsonl: line-numbered reading, atomic writing."""

from __future__ import annotations

import pytest

from orchrm.jsonl import read_jsonl, write_jsonl


def test_read_jsonl_numbers_lines_and_names_the_bad_one(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n[2]\n{oops\n')
    rows = read_jsonl(path)
    assert next(rows) == (1, {"a": 1}) and next(rows) == (3, [2])
    with pytest.raises(ValueError, match=r"x.jsonl:4: invalid JSON"):
        next(rows)


def test_write_jsonl_is_atomic(tmp_path):
    out = tmp_path / "log.jsonl"
    write_jsonl([{"a": 1}], out)

    class Boom:
        pass

    with pytest.raises(TypeError):
        write_jsonl([{"a": 2}, {"b": Boom()}], out)
    assert out.read_text() == '{"a": 1}\n'  # the old log survives, no temp file left
    assert [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]
