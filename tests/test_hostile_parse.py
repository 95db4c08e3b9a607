"""Hostile and degenerate text through parsing, validation, rendering and answer extraction.

Each generator writes text of a given size that once made a parser, the validator, the
reward-model rendering or the answer extractor backtrack or recurse: long runs of every
kind of whitespace after `${`, `<` or `</`, brackets, unclosed and repeated tags, deep
nesting, lone surrogates, thousands of agents. At 10 KB, 100 KB and 1 MB every stage must
raise nothing but `ParseError` and take time that grows linearly: the 100 KB and 1 MB runs
may take at most `SCALE` times the linear share of the 10 KB run, or a small absolute
floor (the machine may be loaded), and a run that passes `HARD_CAP_S` is stopped.
The generators and stages live in `orchrm.runtime.hostile`;
`benchmarks/hostile_parse.py` prints the same measurements as a table.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchrm.orchestration import (
    approx_token_count,
    harmony_tags,
    reference_spans,
    render_for_rm,
    replace_references,
    rm_completion,
    to_harmony,
    validate,
)
from orchrm.parse import (
    MAX_LITERAL_DEPTH,
    MAX_ORCHESTRATION_CHARS,
    ParseError,
    extract_thinking,
    parse_harmony,
    parse_mas_code,
)
from orchrm.runtime.hostile import (
    DEBATE_OPEN,
    GRAPH_GENERATORS,
    GRAPH_STAGES,
    HARD_CAP_S,
    STAGES,
    TEXT_GENERATORS,
    WHITESPACE,
    broken,
    chain,
    hard_cap,
    parse_both,
    repeat,
    text_plan,
    timed,
)
from orchrm.runtime.prompts import extract_answer
from orchrm.tasks.answers import as_number, math_correct
from orchrm.tasks.benchmarks.gpqa import gpqa_letter

SIZES = (10_000, 100_000, 1_000_000)
SCALE = 3.0
"""How far above linear growth a stage may be (10 KB -> 1 MB linear is 100x)."""
FLOOR_S = {100_000: 1.0, 1_000_000: 3.0}
"""Times that always pass at each size, whatever the 10 KB run took."""


def scaling_times(
    fn: Callable[[object], object], make: Callable[[int], object]
) -> dict[int, float]:
    """Seconds of `fn` on `make(size)` for each of `SIZES`: the smallest best of 3, the
    others once, and best of 3 when once is over budget (a busy machine stalls a single
    run; a super-linear stage is slow every time)."""
    small = timed(fn, make(SIZES[0]), 3)
    times = {SIZES[0]: small}
    for size in SIZES[1:]:
        text = make(size)
        times[size] = timed(fn, text)
        if times[size] >= budget(size, small):
            times[size] = min(times[size], timed(fn, text, 2))
    return times


def budget(size: int, small: float) -> float:
    """The most `size` characters may take when `SIZES[0]` took `small` seconds."""
    return max(FLOOR_S[size], SCALE * small * size / SIZES[0])


def assert_linear(times: dict[int, float], what: str) -> None:
    small = times[SIZES[0]]
    for size in SIZES[1:]:
        assert times[size] < budget(size, small), (
            f"{what}: {times[size]:.3f} s at {size:,} characters, over "
            f"{budget(size, small):.3f} s ({small * 1000:.2f} ms at {SIZES[0]:,})"
        )


@pytest.mark.parametrize("name", sorted(TEXT_GENERATORS))
def test_hostile_text_is_handled_in_linear_time(name):
    make = TEXT_GENERATORS[name]
    for stage, fn in STAGES.items():
        assert_linear(scaling_times(fn, make), f"{stage} of {name}")


@pytest.mark.parametrize("name", sorted(GRAPH_GENERATORS))
def test_thousands_of_agents_are_handled_in_linear_time(name):
    make = GRAPH_GENERATORS[name]
    big = make(SIZES[-1])
    assert len(big.agents) >= 4000 and len(to_harmony(big)) > 500_000
    for stage, fn in GRAPH_STAGES.items():
        assert_linear(scaling_times(fn, make), f"{stage} of {name}")


def test_a_valid_graph_of_thousands_of_agents_survives_parsing_and_validation():
    o = chain(SIZES[-1])
    assert parse_harmony(to_harmony(o)) == o
    assert validate(o) == []
    text = render_for_rm("What is the plan?", o)
    assert approx_token_count(text) > 512  # the structure alone is over the budget...
    assert all(f"agent a{i} = " in text for i in (0, len(o.agents) - 1))  # ...and kept


def test_a_graph_breaking_every_rule_gets_every_violation_listed():
    rules = {v.rule.value for v in validate(broken(20_000))}
    assert {"duplicate_agent_id", "cycle", "unknown_reference", "unknown_agent_type"} <= rules
    assert {"low_dom_agent_count", "answer_mismatch", "duplicate_edge"} <= rules


# --------------------------------------------------------------------------- precise errors


def test_deeply_nested_debate_roles_are_a_parse_error_not_a_recursion_error():
    text = DEBATE_OPEN + "[" * 5000 + "</debate_roles></agent><answer>agent</answer>"
    with pytest.raises(ParseError) as err:
        parse_harmony(text)
    assert err.value.reason == "bad_debate_roles" and str(MAX_LITERAL_DEPTH) in err.value.message
    shallow = DEBATE_OPEN + '[["a"], "b"]</debate_roles></agent>'
    with pytest.raises(ParseError, match="not a list of strings"):
        parse_harmony(shallow)


@pytest.mark.parametrize(
    "code",
    [
        "agents_config = " + "[" * 5000 + "]" * 5000,
        "agents_config = " + "-" * 100_000 + "1",
        "agents_config = 1" + "+1" * 200_000,
        "agents_config = [" + "{'a': " * 150 + "1" + "}" * 150 + "]",
        "agent_calls = x" + ".y" * 200_000,
    ],
)
def test_deep_mas_code_is_a_parse_error(code):
    with pytest.raises(ParseError) as err:
        parse_mas_code(code)
    assert err.value.reason in ("mas_code_syntax", "mas_code_too_deep")
    assert err.value.source == "mas_code"


@pytest.mark.parametrize("parser", [parse_harmony, parse_mas_code])
def test_text_over_the_size_bound_is_refused_before_any_work(parser):
    text = "<" + " " * MAX_ORCHESTRATION_CHARS
    start = time.perf_counter()
    with pytest.raises(ParseError) as err:
        parser(text)
    assert err.value.reason == "too_long" and "2,000,001 characters" in err.value.message
    assert time.perf_counter() - start < 0.5


# --------------------------------------------------------------------------- lone surrogates


SURROGATE_PLAN = (
    "<thinking>why \ud800</thinking>\n<agent><agent_id>a\udc00</agent_id>"
    "<agent_name>DebateAgent</agent_name><agent_description>d\ud800</agent_description>"
    '<agent_input>use ${b} \udfff</agent_input><debate_roles>["x\ud800", "y"]</debate_roles>'
    "</agent>\n<agent><agent_id>b</agent_id><agent_name>CoTAgent</agent_name></agent>"
    "<edge><from>b</from><to>a\udc00</to></edge><answer>a\udc00</answer>"
)


def test_lone_surrogates_parse_validate_and_render_to_text_a_tokenizer_accepts():
    from transformers import AutoTokenizer

    from orchrm.rmodel.tokens import default_backbone, token_counter

    o = parse_harmony(SURROGATE_PLAN)
    assert o.agents[0].debate_roles == ("x\ud800", "y")
    assert [v.rule.value for v in validate(o)] == ["invalid_agent_id"]
    tokenizer = AutoTokenizer.from_pretrained(default_backbone())
    for count in (None, token_counter(tokenizer)):
        text = render_for_rm("q \ud800 \ud83d\ude00", o, 64, count)
        text.encode("utf-8")  # raises on a surrogate
        assert "\ufffd" in text and tokenizer(text)["input_ids"]
    code = "agent_calls = [{'agent_name': 'CoTAgent\ud800', 'required_arguments': {}}]"
    assert parse_mas_code(code).agents[0].type == "CoTAgent\ufffd"
    assert extract_answer("Answer: \ud800") == "\ud800"


# --------------------------------------------------------------------------- same answers


# The patterns the linear scans replace, kept here as the definition they must agree with on
# input too small to make them backtrack for long.
OLD_REFERENCE = re.compile(r"\$\{\s*([^{}]*?)\s*\}")
OLD_TAG = re.compile(
    r"<\s*(/?)\s*(thinking|agent|agent_name|agent_id|agent_description|required_arguments"
    r"|agent_input|debate_roles|agent_output_id|answer|edge|from|to)\s*>",
    re.IGNORECASE,
)
OLD_ANSWER = re.compile(r"^\s*\**\s*answer\s*\**\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)

pieces = st.lists(
    st.sampled_from(
        [
            *("${", "$", "{", "}", " ", "\t", "\n", "\u00a0", "a", "b_1", "<", "/", ">", "</"),
            *("Agent", "edge", "thinking", "to", "from", "answer", "Answer:", "**", ":", "5"),
            *(".", "\r"),
        ]
    ),
    max_size=24,
).map("".join)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces)
def test_references_and_tags_are_read_as_the_patterns_define_them(text):
    assert [name for _, _, name in reference_spans(text)] == OLD_REFERENCE.findall(text)
    assert replace_references(text, lambda name: f"<{name}>") == OLD_REFERENCE.sub(
        lambda m: f"<{m.group(1)}>", text
    )
    old = [
        (m.start(), m.end(), bool(m.group(1)), m.group(2).lower()) for m in OLD_TAG.finditer(text)
    ]
    assert list(harmony_tags(text)) == old


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces)
def test_answer_lines_are_read_as_the_pattern_defines_them(text):
    # Where a label is split over two lines ("answer\n:") the pattern matched across them;
    # the line scan reads labels on one line only.
    if re.search(r"answer\s*\**\s*\n", text, re.IGNORECASE) or re.search(r"\*\s*\n", text):
        return
    found = OLD_ANSWER.findall(text)
    if found:
        assert extract_answer(text) == found[-1].strip().rstrip(".").strip("*").strip()


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("".join(WHITESPACE.values()), 0),  # every kind of whitespace separates, none counts
        ("x_1 = 3.5;", 6),  # a run of letters, digits and underscores is one token
        ("<agent>${a}", 7),  # every other mark is a token of its own
        ("\u200b\ud800é", 3),  # zero-width space and lone surrogate: marks; é: a letter
    ],
)
def test_approx_token_count_counts_word_runs_and_marks(text, tokens):
    assert approx_token_count(text) == tokens
    assert approx_token_count(" ".join([text] * 1000)) == 1000 * tokens  # linear


UNCUT_FRAME = approx_token_count(rm_completion(text_plan("w"), 10**9)) - 5
"""Tokens of `text_plan`'s uncut completion besides its text and the text's head
(`text[:100]`): "w" is one token, in thinking, description, input, first role and answer."""


hostile_piece = st.sampled_from(
    [
        *WHITESPACE.values(),
        *("<", "</", ">", "${", "}", "{", "[", "]", "(", ")", "\ud800", "```", "a", "x"),
        *("<thinking>", "</thinking>", "<agent>", "</agent>", "<agent_input>", "<agent_name>"),
        *("CoTAgent", "</agent_name>", "<edge>", "<from>", "<to>", "<answer>", "Answer:"),
        *("<debate_roles>", "assistantfinal", "agents_config = [", "\\boxed{"),
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(hostile_piece, st.integers(1, 3000)), min_size=1, max_size=8))
def test_random_runs_of_hostile_pieces_raise_only_parse_errors(runs):
    text = "".join(piece * n for piece, n in runs)
    with hard_cap(HARD_CAP_S):
        parse_both(text)
        extract_thinking(text)
        validate(text_plan(text))
        rendered = render_for_rm(text, text_plan(text), 256)
        uncut = approx_token_count(rm_completion(text_plan(text), 10**9))
        whole, head = approx_token_count(text), approx_token_count(text[:100])
        if whole:  # nothing cut: the text in thinking, description and input, its head twice
            assert uncut == UNCUT_FRAME + 3 * whole + 2 * head
        assert isinstance(extract_answer(text), str)
    rendered.encode("utf-8")


# --------------------------------------------------------------------------- grading


@pytest.mark.parametrize(
    "answer",
    ["1e10000000", "1e0000000010000000", "1e1_000_000", "\\frac{" + "1" * 5000 + "}{1}"],
)
def test_huge_numbers_are_not_built(answer):
    start = time.perf_counter()
    assert as_number(answer) is None
    assert math_correct(answer, "5") is False
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize(
    ("answer", "value"), [("1e0", 1), ("2e00", 2), ("1e_", None), ("Kelgate0", None)]
)
def test_a_zero_or_empty_exponent_reads_as_its_number_or_none(answer, value):
    assert as_number(answer) == value
    assert isinstance(math_correct(answer, "1"), bool)  # graded, not raised


def test_grading_degenerate_answers_takes_linear_time():
    assert as_number("\\boxed{25}.") == 25
    assert gpqa_letter("the answer is (b)") == "B"
    for make in (repeat("", "\\boxed{"), repeat("answer", " "), repeat("answer is", "\t")):
        for size in (10_000, 1_000_000):
            text = make(size)
            with hard_cap(HARD_CAP_S):
                start = time.perf_counter()
                assert as_number(text) is None and gpqa_letter(text) is None
                assert time.perf_counter() - start < max(1.0, size / 1_000_000)
