"""orchrm.jsonl: line-numbered reading of untrusted bytes, atomic writing."""

from __future__ import annotations

import json
import random
import time

import pytest

from orchrm import jsonl
from orchrm.jsonl import BLANK, BadLine, read_jsonl, read_values, write_jsonl


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


# --------------------------------------------------------------------------- hostile lines


def values(tmp_path, content: bytes) -> list[tuple[int, object]]:
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    return list(read_values(path))


def reasons(items) -> list:
    return [(n, v.reason if isinstance(v, BadLine) else v) for n, v in items]


def test_lines_are_split_as_bytes_whatever_their_ending(tmp_path, monkeypatch):
    content = b'\xef\xbb\xbf{"a": 1}\r\n\n \t\n"\x00"\n{"b": "\\u2028 \xe2\x80\xa8"}\n[2]'
    expected = [
        (1, {"a": 1}),  # the byte-order mark and the \r are dropped
        (2, BLANK),
        (3, BLANK),
        (4, "invalid_json"),  # a raw NUL in a string
        (5, {"b": "\u2028 \u2028"}),  # U+2028 inside a string does not end the line
        (6, [2]),  # no final newline
    ]
    assert reasons(values(tmp_path, content)) == expected
    monkeypatch.setattr(jsonl, "_CHUNK_BYTES", 3)  # every line spans several reads
    assert reasons(values(tmp_path, content)) == expected


def test_an_over_long_line_is_counted_and_the_next_one_read(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 100)
    monkeypatch.setattr(jsonl, "_CHUNK_BYTES", 16)
    long_line = b'{"a": "' + b"x" * 500 + b'"}'
    items = values(tmp_path, long_line + b"\n" + b'{"a": 1}\n' + long_line)
    assert reasons(items) == [(1, "too_large"), (2, {"a": 1}), (3, "too_large")]
    assert items[0][1].message == "line of 509 bytes, over the 100-byte limit"


def test_each_line_is_decoded_on_its_own(tmp_path):
    items = values(tmp_path, b'{"a": 1}\n{"b": "\xff"}\n\x89PNG\x00\x01\n{"c": 3}\n')
    assert reasons(items) == [(1, {"a": 1}), (2, "not_utf8"), (3, "not_utf8"), (4, {"c": 3})]
    assert items[1][1].message == "invalid UTF-8 byte 0xff at byte 7"


def test_nesting_is_bounded_before_the_decoder_recurses():
    limit = jsonl.MAX_JSON_DEPTH
    at_limit: list = []
    for _ in range(limit - 1):
        at_limit = [at_limit]
    assert jsonl.loads("[" * limit + "]" * limit) == at_limit  # the deepest allowed, parsed
    deep = jsonl.loads('{"a": ' + "[" * limit + "]" * limit + "}")  # the object is a level
    assert isinstance(deep, BadLine) and deep.reason == "too_deep"
    assert deep.position == len('{"a": ') + limit - 1  # the bracket one level too deep
    huge = jsonl.loads("[" * 1_000_000)
    assert isinstance(huge, BadLine) and huge.reason == "too_deep"
    # Brackets inside strings, escaped quotes and backslashes included, are text.
    in_strings = json.dumps(["[" * 300, '\\"[[[' * 100, "\\" * 7 + "{" * 200])
    assert jsonl.loads(in_strings) == json.loads(in_strings)
    many_shallow = "[" + ",".join(["[[1]]"] * 1000) + "]"
    assert jsonl.loads(many_shallow) == json.loads(many_shallow)


def test_lone_surrogates_are_refused_with_where_they_are():
    pair = jsonl.loads('{"q": "\\ud83d\\ude00"}')  # an escaped pair is one character
    assert pair == {"q": "\U0001f600"}
    bad = jsonl.loads('{"a": {"b": [1, "x\\udc80"]}}')
    assert isinstance(bad, BadLine) and bad.reason == "bad_field"
    assert bad.message.startswith("a.b[1]: text holds a lone surrogate (\\udc80) at character 1")
    key = jsonl.loads('{"\\ud800": 1}')
    assert key.message.startswith("\\ud800 (the key): text holds a lone surrogate")
    bad.message.encode("utf-8")  # the message itself can be printed


def test_read_jsonl_raises_with_the_reason_in_words(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "\xff"}\n')
    rows = read_jsonl(path)
    assert next(rows) == (1, {"a": 1})
    with pytest.raises(ValueError, match=r"x.jsonl:2: not UTF-8 \(invalid UTF-8 byte 0xff"):
        next(rows)


def test_hostile_lines_are_read_in_linear_time():
    # Budgets are far above what a linear pass needs on a loaded machine, and far below
    # what a quadratic one would take on these inputs.
    cases = {
        "escapes": '["' + '\\"' * 2_000_000 + '"' + ",[]" * 200 + "]",
        "unterminated": "[" * 100 + '"' + '\\"' * 2_000_000,
        "opened": "[" * 4_000_000,
    }
    for name, text in cases.items():
        start = time.perf_counter()
        jsonl.loads(text)
        assert time.perf_counter() - start < 5, name


def test_an_over_long_line_is_not_held_in_memory(tmp_path, monkeypatch):
    import tracemalloc

    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "x.jsonl"
    with open(path, "wb") as f:
        f.write(b'"' + b"x" * 30_000_000 + b'"\n{"a": 1}\n')
    tracemalloc.start()
    try:
        items = list(read_values(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reasons(items) == [(1, "too_large"), (2, {"a": 1})]
    assert peak < 8_000_000  # a few read chunks, not the 30 MB line


def reference_too_deep_at(text: str, limit: int) -> int | None:
    """The running depth (openers minus closers outside strings) read character by
    character, strings skipped as the decoder skips them."""
    depth, i = 0, 0
    while i < len(text):
        if text[i] == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            if i >= len(text):
                return None
        elif text[i] in "[{":
            depth += 1
            if depth > limit:
                return i
        elif text[i] in "]}":
            depth -= 1
        i += 1
    return None


def test_the_depth_check_agrees_with_a_character_by_character_reading():
    rng = random.Random(0)
    for _ in range(20_000):
        text = "".join(rng.choice('[]{}"\\a,') for _ in range(rng.randint(0, 16)))
        assert jsonl._too_deep_at(text, 3) == reference_too_deep_at(text, 3), repr(text)
