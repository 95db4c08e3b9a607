"""orchrm.parse: every input form -> Orchestration, or a ParseError saying what and where."""

from __future__ import annotations

import json

import pytest

from orchrm.orchestration import DoM, Edge, Orchestration, Rule, to_harmony, validate
from orchrm.parse import (
    ParseError,
    extract_thinking,
    from_dict,
    parse_harmony,
    parse_json_graph,
    parse_mas_code,
    parse_record,
    read_records,
    summarize_file,
)
from tests.samples import DATA, GRAPH_CODE, HIGH_DOM, LOW_CODE, LOW_DOM


def reason_of(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_harmony(text)
    return info.value


# --------------------------------------------------------------------------- harmony


def test_low_dom_reads_every_field_and_is_valid():
    o = parse_harmony(LOW_DOM)
    assert o.dom == DoM.LOW
    (agent,) = o.agents
    assert (agent.id, agent.output_id, agent.type) == ("geo_out", "geo_out", "DebateAgent")
    assert agent.debate_roles == ("Geometry Theorist", "Trigonometry Specialist")
    assert agent.input == ""
    assert o.answer == "geo_out" and o.thinking == "A near tie: debate it."
    assert validate(o) == []


def test_high_dom_reads_agents_edges_and_sink():
    o = parse_harmony(HIGH_DOM)
    assert o.dom == DoM.HIGH
    assert [a.id for a in o.agents] == ["Parse", "Solve"]
    assert o.edges == (Edge("Parse", "Solve"),)
    assert o.sink == "Solve"
    assert validate(o) == []


def test_direct_answer_without_agents():
    o = parse_harmony("<thinking>Trivial.</thinking>\n<answer>42</answer>")
    assert o.agents == () and o.direct_answer == "42" and o.dom == DoM.LOW
    assert validate(o) == []


def test_prose_and_code_fences_around_the_xml_are_ignored():
    wrapped = f"Sure! Here is the plan:\n```xml\n{HIGH_DOM}```\nHope this helps."
    assert parse_harmony(wrapped) == parse_harmony(HIGH_DOM)


def test_gpt_oss_prefix_reads_only_after_the_last_final_marker():
    draft = "<agent><agent_id>Draft</agent_id><agent_name>CoTAgent</agent_name></agent>"
    text = f"analysisLet me draft: {draft} no wait.assistantfinal{HIGH_DOM}"
    assert [a.id for a in parse_harmony(text).agents] == ["Parse", "Solve"]
    tokens = f"<|channel|>analysis<|message|>{draft}<|end|><|channel|>final<|message|>{HIGH_DOM}"
    assert [a.id for a in parse_harmony(tokens).agents] == ["Parse", "Solve"]


def test_gpt_oss_trace_cut_before_the_final_channel_is_reported_as_such():
    text = "analysisWe need two agents.\n<agent><agent_name>CoTAgent</agent_name></agent>"
    err = reason_of(text)
    assert err.reason == "no_final_channel" and err.offset == len(text)


def test_whitespace_inside_ids_is_stripped():
    text = HIGH_DOM.replace("<agent_id>Parse</agent_id>", "<agent_id>\n   Parse  \n</agent_id>")
    text = text.replace("<from>Parse</from>", "<from> Parse </from>")
    o = parse_harmony(text)
    assert o.agents[0].id == "Parse" and o.edges == (Edge("Parse", "Solve"),)
    assert validate(o) == []


@pytest.mark.parametrize(
    "roles",
    [
        '["Geometry Theorist", "Trigonometry Specialist"]',
        "['Geometry Theorist', 'Trigonometry Specialist']",
        "Geometry Theorist, Trigonometry Specialist",
        "\n  Geometry Theorist\n  Trigonometry Specialist\n",
    ],
)
def test_debate_roles_in_every_list_style(roles):
    text = LOW_DOM.replace('["Geometry Theorist", "Trigonometry Specialist"]', roles)
    assert parse_harmony(text).agents[0].debate_roles == (
        "Geometry Theorist",
        "Trigonometry Specialist",
    )


def test_debate_roles_that_are_not_strings_are_an_error_at_their_offset():
    text = LOW_DOM.replace('["Geometry Theorist", "Trigonometry Specialist"]', "[1, 2]")
    err = reason_of(text)
    assert err.reason == "bad_debate_roles"
    assert text[err.offset :].startswith("<debate_roles>")


@pytest.mark.parametrize("edge_block", ["<edge></edge>", "<edge>\n</edge>", ""])
def test_single_agent_with_empty_or_missing_edge_block_is_valid(edge_block):
    text = (
        "<agent><agent_id>Only</agent_id><agent_name>CoTAgent</agent_name>"
        "<agent_description>d</agent_description>"
        f"<required_arguments><agent_input></agent_input></required_arguments></agent>{edge_block}"
    )
    o = parse_harmony(text)
    assert o.dom == DoM.HIGH and [a.id for a in o.agents] == ["Only"]
    assert validate(o) == []


def test_missing_closing_tags_end_at_the_next_tag():
    text = (
        "<thinking>plan\n<agent><agent_id>A<agent_name>CoTAgent\n<agent_input>first\n"
        "<agent><agent_id>B</agent_id><agent_name>CoTAgent</agent_name>"
        "<agent_input>use ${A}</agent_input>\n<edge><from>A</from><to>B</to>"
    )
    o = parse_harmony(text)
    assert [(a.id, a.type, a.input) for a in o.agents] == [
        ("A", "CoTAgent", "first"),
        ("B", "CoTAgent", "use ${A}"),
    ]
    assert o.thinking == "plan" and o.edges == (Edge("A", "B"),)
    assert validate(o) == []


def test_tags_mentioned_inside_a_closed_thinking_are_prose():
    text = HIGH_DOM.replace("Extract, then solve.", "One <edge> block, each <agent> has an id.")
    o = parse_harmony(text)
    assert o.thinking == "One <edge> block, each <agent> has an id."
    assert o.edges == (Edge("Parse", "Solve"),)


def test_tag_names_are_case_and_space_insensitive():
    text = HIGH_DOM.replace("<edge>", "< EDGE >").replace("</edge>", "</ Edge>")
    assert parse_harmony(text) == parse_harmony(HIGH_DOM)


def test_unpaired_edge_points_at_the_lonely_tag():
    text = HIGH_DOM.replace("<to>Solve</to>", "")
    err = reason_of(text)
    assert err.reason == "unpaired_edge" and text[err.offset :].startswith("<from>Parse")


@pytest.mark.parametrize(
    ("text", "reason", "points_at"),
    [
        ("", "empty", None),
        ("   \n", "empty", None),
        ("Just prose, no plan.", "no_orchestration", None),
        ("<thinking>We will use two agents", "no_agents", "<thinking>"),
        ("<agent><agent_id>A</agent_id></agent>", "missing_agent_name", "<agent>"),
        (HIGH_DOM + "<edge></edge>", "duplicate_edge_block", "<edge></edge>"),
        ("<answer>1</answer><answer>2</answer>", "duplicate_answer", "<answer>2"),
        (
            "<agent><agent_name>CoTAgent</agent_name><agent_name>SCAgent</agent_name></agent>",
            "duplicate_field",
            "<agent_name>SCAgent",
        ),
        (
            "<agent><agent_name>CoTAgent</agent_name></agent>"
            "<agent><agent_name>SCAgent</agent_name></agent>",
            "missing_agent_id",
            "<agent>",
        ),
        (
            "<edge><agent_input>x</agent_input></edge><answer>1</answer>",
            "unexpected_tag",
            "<agent_",
        ),
    ],
)
def test_malformed_text_raises_a_reason_and_an_offset(text, reason, points_at):
    err = reason_of(text)
    assert err.reason == reason
    assert isinstance(err, ValueError) and reason in str(err)
    assert err.offset is not None and 0 <= err.offset <= len(text)
    if points_at:
        assert text[err.offset :].startswith(points_at)


def test_non_text_is_a_parse_error():
    with pytest.raises(ParseError) as info:
        parse_harmony(None)  # type: ignore[arg-type]
    assert info.value.reason == "not_text" and info.value.offset is None


def test_extract_thinking_survives_truncation():
    assert extract_thinking("analysis...assistantfinal<thinking>\nWhy one agent.") == (
        "Why one agent."
    )
    assert extract_thinking(12) == ""


@pytest.mark.parametrize("text", [LOW_DOM, HIGH_DOM])
def test_harmony_round_trip_of_hand_written_examples(text):
    o = parse_harmony(text)
    assert parse_harmony(to_harmony(o)) == o


# --------------------------------------------------------------------------- mas_code


def test_mas_code_multi_agent_graph():
    o = parse_mas_code(GRAPH_CODE)
    assert o.dom == DoM.HIGH
    assert [(a.id, a.type) for a in o.agents] == [("Parse", "CoTAgent"), ("Judge", "DebateAgent")]
    assert o.agents[1].debate_roles == ("Skeptic", "Solver")
    assert o.edges == (Edge("Parse", "Judge"),)
    assert validate(o) == []


def test_mas_code_low_dom_single_agent_with_python_literal_calls():
    o = parse_mas_code(LOW_CODE)
    assert o.dom == DoM.LOW
    (agent,) = o.agents
    assert (agent.id, agent.output_id, agent.type) == ("refl_out", "refl_out", "ReflexionAgent")
    assert agent.description == "Answer, critique, refine."


def test_mas_code_is_never_executed(tmp_path):
    marker = tmp_path / "executed"
    code = (
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n"
        f"agents_config = [__import__('os').system('touch {marker}')]\n"
        "agent_calls = [{'name': 'CoTAgent', 'required_arguments': {'agent_input': ''}}]\n"
    )
    with pytest.raises(ParseError) as info:
        parse_mas_code(code)
    assert info.value.reason == "mas_code_bad_agent"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("", "empty"),
        ("direct_answer", "mas_code_no_agents"),
        ("def forward(:\n    pass", "mas_code_syntax"),
        (
            "agents_config = [{'agent_name': 'CoTAgent', 'required_arguments': {}}]",
            "missing_agent_id",
        ),
        (
            "agents_config = [{'agent_id': 'A', 'agent_name': 'CoTAgent'}]\nedges = [['A']]",
            "mas_code_bad_edges",
        ),
        ("agent_calls = ['CoTAgent']", "mas_code_bad_agent"),
    ],
)
def test_mas_code_errors(code, reason):
    with pytest.raises(ParseError) as info:
        parse_mas_code(code)
    assert info.value.reason == reason and info.value.source == "mas_code"


def test_mas_code_syntax_error_offset_is_the_start_of_its_line():
    code = "x = 1\ny = (\n"
    with pytest.raises(ParseError) as info:
        parse_mas_code(code)
    assert info.value.offset in (code.index("y"), len(code))


# --------------------------------------------------------------------------- JSON forms


def test_orchrm_json_round_trip_is_lossless():
    for o in (parse_harmony(LOW_DOM), parse_harmony(HIGH_DOM), parse_mas_code(GRAPH_CODE)):
        assert from_dict(json.loads(json.dumps(o.to_dict()))) == o


def test_orchrm_json_errors_name_the_field():
    data = parse_harmony(HIGH_DOM).to_dict()
    data["agents"][1]["type"] = 7
    with pytest.raises(ParseError, match=r"agents\[1\]\.type"):
        from_dict(data)
    with pytest.raises(ParseError, match="dom"):
        from_dict({**data, "dom": "medium"})


def test_json_graph_form():
    graph = {
        "agents": [
            {"id": "A", "type": "CoTAgent", "description": "a", "input": ""},
            {"id": "B", "type": "CoTAgent", "input": "from ${A}", "depends_on": ["A"]},
            {
                "id": "C",
                "type": "DebateAgent",
                "input": "${A} ${B}",
                "depends_on": ["B"],
                "debate_roles": ["x", "y"],
            },
        ],
        "edges": [{"from": "A", "to": "C"}, ["A", "B"]],
        "answer_agent": "C",
    }
    o = parse_json_graph(graph)
    assert o.edges == (Edge("A", "B"), Edge("B", "C"), Edge("A", "C"))
    assert o.answer == "C" and o.sink == "C"
    assert validate(o) == []


def test_json_graph_answer_agent_that_is_not_the_sink_is_a_violation():
    graph = {
        "agents": [
            {"id": "A", "type": "CoTAgent"},
            {"id": "B", "type": "CoTAgent", "input": "${A}", "depends_on": ["A"]},
        ],
        "answer_agent": "A",
    }
    assert [v.rule for v in validate(parse_json_graph(graph))] == [Rule.ANSWER_MISMATCH]


def test_json_graph_bad_field_is_named():
    with pytest.raises(ParseError, match=r"agents\[0\]\.depends_on"):
        parse_json_graph({"agents": [{"id": "A", "type": "CoTAgent", "depends_on": "B"}]})


# --------------------------------------------------------------------------- records and files


def test_record_kinds_are_dispatched():
    o = parse_harmony(HIGH_DOM)
    assert parse_record({"full_response": HIGH_DOM}) == o
    assert parse_record({"orchestration": HIGH_DOM}) == o
    assert parse_record({"orchestration": o.to_dict()}) == o
    assert parse_record(o.to_dict()) == o
    assert parse_record(HIGH_DOM) == o


def test_a_null_orchestration_is_read_from_the_raw_text_beside_it():
    assert parse_record({"orchestration": None, "raw": HIGH_DOM}) == parse_harmony(HIGH_DOM)
    with pytest.raises(ParseError) as info:
        parse_record({"orchestration": None, "raw": "<thinking>cut off"})
    assert info.value.reason != "not_a_record" and "raw" in str(info.value)
    with pytest.raises(ParseError) as info:  # nothing else to read: the null is the error
        parse_record({"orchestration": None})
    assert info.value.reason == "not_a_record"


def test_unknown_record_and_field_errors_name_the_field():
    with pytest.raises(ParseError) as info:
        parse_record({"question": "q"})
    assert info.value.reason == "unknown_record"
    with pytest.raises(ParseError) as info:
        parse_record({"full_response": "no plan at all"})
    assert info.value.source == "full_response" and info.value.reason == "no_orchestration"
    with pytest.raises(ParseError) as info:
        parse_record([1, 2])
    assert info.value.reason == "not_a_record"


def test_diagram_record_prefers_complete_xml_in_thinking():
    record = {"thinking": "analysis...assistantfinal" + HIGH_DOM, "mas_code": GRAPH_CODE}
    assert [a.id for a in parse_record(record).agents] == ["Parse", "Solve"]


def test_diagram_record_falls_back_to_mas_code_keeping_the_thinking():
    record = {
        "thinking": "analysis...assistantfinal<thinking>\nWhy two agents.",
        "mas_code": GRAPH_CODE,
    }
    o = parse_record(record)
    assert [a.id for a in o.agents] == ["Parse", "Judge"] and o.thinking == "Why two agents."


def test_diagram_record_with_nothing_usable_says_why_for_both_fields():
    with pytest.raises(ParseError) as info:
        parse_record({"thinking": "assistantfinal<thinking>cut here", "mas_code": ""})
    assert info.value.reason == "no_agents" and "mas_code is empty" in str(info.value)
    with pytest.raises(ParseError) as info:
        parse_record({"thinking": "assistantfinal<thinking>cut", "mas_code": "def f(:"})
    assert info.value.reason == "mas_code_syntax" and info.value.source == "mas_code"


def test_read_records_counts_bad_lines_instead_of_dropping_them(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(
        json.dumps({"full_response": HIGH_DOM}) + "\n\n{not json\n" + json.dumps([1]) + "\n"
    )
    items = list(read_records(path))
    assert [line for line, _ in items] == [1, 3, 4]
    assert isinstance(items[1][1], ParseError) and items[1][1].reason == "invalid_json"
    summary = summarize_file(path)
    assert (summary.records, summary.valid, summary.unparseable) == (3, 1, 2)
    assert summary.unparseable_by_reason == {"invalid_json": 1, "not_a_record": 1}
    assert [p["line"] for p in summary.problems] == [3, 4]


def test_read_records_json_list_text_and_bad_encoding(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps([{"full_response": HIGH_DOM}, HIGH_DOM]))
    assert len(list(read_records(tmp_path / "a.json"))) == 2
    (tmp_path / "b.txt").write_text(HIGH_DOM)
    assert parse_record(next(iter(read_records(tmp_path / "b.txt")))[1]) == parse_harmony(HIGH_DOM)
    (tmp_path / "c.jsonl").write_bytes(b'{"text": "\xff"}\n')
    (item,) = [r for _, r in read_records(tmp_path / "c.jsonl")]
    assert isinstance(item, ParseError) and item.reason == "not_utf8"


def test_invalid_records_are_counted_by_rule(tmp_path):
    broken = HIGH_DOM.replace("Solve: ${Parse}", "Solve it")  # edge without reference
    cyclic = HIGH_DOM.replace("<to>Solve</to>", "<to>Solve</to><from>Solve</from><to>Parse</to>")
    path = tmp_path / "x.jsonl"
    path.write_text("\n".join(json.dumps({"full_response": t}) for t in (broken, cyclic)))
    summary = summarize_file(path)
    assert summary.invalid == 2
    assert summary.invalid_by_rule[Rule.EDGE_WITHOUT_REFERENCE.value] == 2
    assert summary.invalid_by_rule[Rule.CYCLE.value] == 1


# --------------------------------------------------------------------------- real data

REAL_COUNTS = {
    # file: (records, valid, invalid, unparseable by reason) as measured by `orchrm parse`
    "masbench_depth2_step60.jsonl": (
        42,
        22,
        0,
        {"empty": 1, "no_agents": 15, "no_final_channel": 4},
    ),
    "masbench_depth2_step180.jsonl": (42, 31, 0, {"no_agents": 11}),
}


@pytest.mark.parametrize("name", sorted(REAL_COUNTS))
def test_real_mas_orchestra_records(name):
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared data folder is not beside this checkout")
    records, valid, invalid, reasons = REAL_COUNTS[name]
    summary = summarize_file(path)
    assert (summary.records, summary.valid, summary.invalid) == (records, valid, invalid)
    assert dict(summary.unparseable_by_reason) == reasons
    # Every record is accounted for, and each valid one is a real single-agent graph.
    assert summary.valid + summary.invalid + summary.unparseable == summary.records
    for _, record in read_records(path):
        try:
            o = parse_record(record)
        except ParseError:
            assert not record["mas_code"]  # only records without mas_code may fail
            continue
        assert isinstance(o, Orchestration) and o.agents[0].type == "CoTAgent"
        assert o.agents[0].id  # the agent_id written in mas_code
