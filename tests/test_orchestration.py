"""Tests for `orchrm.orchestration`: graph validation, graph queries and the two renderings."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from orchrm.orchestration import (
    FINAL_MARKERS,
    ORCHRM_JSON_FORMAT,
    RM_RENDER_VERSION,
    TYPE_NAMES,
    Agent,
    DoM,
    Edge,
    Orchestration,
    Rule,
    approx_token_count,
    render_for_rm,
    rm_completion,
    rm_prompt,
    to_harmony,
    validate,
)


def cot(agent_id: str, input: str = "", **fields) -> Agent:
    return Agent(agent_id, "CoTAgent", input=input, **fields)


def chain(*ids: str) -> Orchestration:
    """A valid high-DoM chain ids[0] -> ids[1] -> ..., each agent reading the previous one."""
    agents = [cot(ids[0])] + [cot(b, f"use ${{{a}}}") for a, b in pairwise(ids)]
    edges = tuple(Edge(a, b) for a, b in pairwise(ids))
    return Orchestration(agents=tuple(agents), edges=edges, answer=ids[-1])


def agents_for(o: Orchestration, rule: Rule) -> list[tuple[str, ...]]:
    """The `agents` of each violation of `rule` that `validate` reports."""
    return [v.agents for v in validate(o) if v.rule == rule]


def diamond(declared: str = "ABCD") -> Orchestration:
    """A -> B, A -> C, B -> D, C -> D, agents declared in the order given."""
    inputs = {"A": "", "B": "check ${A}", "C": "refute ${A}", "D": "merge ${B} and ${C}"}
    return Orchestration(
        agents=tuple(cot(i, inputs[i]) for i in declared),
        edges=(Edge("A", "B"), Edge("A", "C"), Edge("B", "D"), Edge("C", "D")),
        answer="D",
    )


TWO_CYCLE = Orchestration(
    agents=(cot("A", "${B}"), cot("B", "${A}")), edges=(Edge("A", "B"), Edge("B", "A"))
)


# --------------------------------------------------------------------------- validate: each rule


@pytest.mark.parametrize("answer", [None, "   "])
def test_no_agent_and_no_direct_answer_is_empty(answer):
    assert agents_for(Orchestration(answer=answer), Rule.EMPTY) == [()]


def test_unknown_agent_type_names_the_agent():
    o = Orchestration(
        agents=(cot("A"), Agent("B", "MagicAgent", input="${A}")), edges=(Edge("A", "B"),)
    )
    assert agents_for(o, Rule.UNKNOWN_AGENT_TYPE) == [("B",)]


@pytest.mark.parametrize("bad_id", ["step-1", "a b", ""])
def test_agent_id_must_be_letters_digits_underscore(bad_id):
    assert agents_for(Orchestration(agents=(cot(bad_id),)), Rule.INVALID_AGENT_ID) == [(bad_id,)]


def test_duplicate_agent_id_is_reported_once():
    o = Orchestration(agents=(cot("A"), cot("A"), cot("B", "${A}")), edges=(Edge("A", "B"),))
    assert agents_for(o, Rule.DUPLICATE_AGENT_ID) == [("A",)]


def test_low_dom_allows_one_agent():
    o = Orchestration(agents=(cot("A"), cot("B")), dom=DoM.LOW)
    assert agents_for(o, Rule.LOW_DOM_AGENT_COUNT) == [("A", "B")]


def test_edge_to_undeclared_agent_names_the_undeclared_one():
    o = Orchestration(agents=(cot("A"),), edges=(Edge("A", "Ghost"),))
    assert agents_for(o, Rule.EDGE_UNKNOWN_AGENT) == [("Ghost",)]


def test_duplicate_edge():
    o = chain("A", "B")
    o = Orchestration(agents=o.agents, edges=o.edges * 2, answer="B")
    assert agents_for(o, Rule.DUPLICATE_EDGE) == [("A", "B")]


def test_self_loop():
    o = chain("A", "B")
    o = Orchestration(agents=o.agents, edges=(*o.edges, Edge("B", "B")), answer="B")
    assert agents_for(o, Rule.SELF_LOOP) == [("B",)]


def test_cycle_names_the_agents_on_it():
    o = Orchestration(
        agents=(cot("A"), cot("B", "${A} ${C}"), cot("C", "${B}")),
        edges=(Edge("A", "B"), Edge("B", "C"), Edge("C", "B")),
    )
    assert agents_for(o, Rule.CYCLE) == [("B", "C")]


def test_no_start_node_when_every_agent_has_an_incoming_edge():
    assert agents_for(TWO_CYCLE, Rule.NO_START_NODE) == [()]
    assert agents_for(TWO_CYCLE, Rule.CYCLE) == [("A", "B")]


def test_zero_sinks():
    assert agents_for(TWO_CYCLE, Rule.SINK_COUNT) == [()]


def test_two_sinks_names_both():
    o = Orchestration(
        agents=(cot("A"), cot("B", "${A}"), cot("C", "${A}")),
        edges=(Edge("A", "B"), Edge("A", "C")),
    )
    assert agents_for(o, Rule.SINK_COUNT) == [("B", "C")]


def test_agent_outside_the_main_flow_is_disconnected_even_when_declared_first():
    o = chain("A", "B")
    o = Orchestration(agents=(cot("C"), *o.agents), edges=o.edges, answer="B")
    assert agents_for(o, Rule.DISCONNECTED) == [("C",)]


def test_reference_to_undeclared_agent():
    o = Orchestration(agents=(cot("A"), cot("B", "${A} and ${Ghost}")), edges=(Edge("A", "B"),))
    assert agents_for(o, Rule.UNKNOWN_REFERENCE) == [("B", "Ghost")]


def test_reference_without_edge():
    o = Orchestration(
        agents=(cot("A"), cot("B", "${A}"), cot("C", "${A} ${B}")),
        edges=(Edge("A", "B"), Edge("B", "C")),
    )
    assert agents_for(o, Rule.REFERENCE_WITHOUT_EDGE) == [("A", "C")]


def test_edge_without_reference():
    o = Orchestration(agents=(cot("A"), cot("B", "no reference")), edges=(Edge("A", "B"),))
    assert agents_for(o, Rule.EDGE_WITHOUT_REFERENCE) == [("A", "B")]


def test_agent_reading_its_own_output_is_invalid():
    # ${A} in A's input needs an edge A->A, which is a forbidden self-loop: never valid.
    assert validate(Orchestration(agents=(cot("A", "refine ${A}"),))) != []


@pytest.mark.parametrize(
    ("roles", "reported"), [(None, True), (("Skeptic",), True), (("Pro", "Con"), False)]
)
def test_debate_agent_needs_two_roles(roles, reported):
    o = Orchestration(agents=(Agent("D", "DebateAgent", debate_roles=roles),))
    assert agents_for(o, Rule.DEBATE_ROLES) == ([("D",)] if reported else [])


def test_answer_naming_no_agent():
    o = Orchestration(agents=chain("A", "B").agents, edges=chain("A", "B").edges, answer="Ghost")
    assert agents_for(o, Rule.ANSWER_MISMATCH) == [()]


def test_answer_naming_a_non_sink_agent_names_it_and_the_sink():
    o = Orchestration(agents=chain("A", "B").agents, edges=chain("A", "B").edges, answer="A")
    assert agents_for(o, Rule.ANSWER_MISMATCH) == [("A", "B")]


# --------------------------------------------------------------------------- validate: valid graphs

VALID = {
    "single agent, no edges": Orchestration(agents=(cot("solo"),), answer="solo"),
    "low DoM single agent": Orchestration(
        agents=(cot("geo_out", output_id="geo_out"),), dom=DoM.LOW, answer="geo_out"
    ),
    "direct answer": Orchestration(dom=DoM.LOW, answer="42"),
    "diamond": diamond(),
    "debate with two roles": Orchestration(
        agents=(Agent("D", "DebateAgent", debate_roles=("Geometry", "Trigonometry")),),
        answer="D",
    ),
    "chain": chain("A", "B", "C"),
}


@pytest.mark.parametrize("o", VALID.values(), ids=VALID.keys())
def test_valid_orchestration_has_no_violation(o):
    assert validate(o) == []


def test_validate_reports_every_violation_not_only_the_first():
    o = Orchestration(
        agents=(Agent("A", "MagicAgent"), cot("bad-id"), Agent("D", "DebateAgent")),
        edges=(Edge("A", "Ghost"), Edge("D", "D")),
        answer="nobody",
    )
    rules = {v.rule for v in validate(o)}
    assert {
        Rule.UNKNOWN_AGENT_TYPE,
        Rule.INVALID_AGENT_ID,
        Rule.DEBATE_ROLES,
        Rule.EDGE_UNKNOWN_AGENT,
        Rule.SELF_LOOP,
        Rule.ANSWER_MISMATCH,
    } <= rules


# --------------------------------------------------------------------------- graph queries


def test_topological_order_breaks_ties_by_declaration_order():
    assert diamond("DCBA").topological_order() == ["A", "C", "B", "D"]
    assert diamond("ABCD").topological_order() == ["A", "B", "C", "D"]
    assert Orchestration(agents=(cot("Z"), cot("Y"))).topological_order() == ["Z", "Y"]


def test_topological_order_is_none_on_a_cycle():
    assert TWO_CYCLE.topological_order() is None


def test_sinks_and_sink():
    assert chain("A", "B").sinks() == ["B"]
    assert chain("A", "B").sink == "B"
    two = Orchestration(agents=(cot("A"), cot("B"), cot("C")), edges=(Edge("A", "C"),))
    assert two.sinks() == ["B", "C"]
    assert two.sink is None
    assert TWO_CYCLE.sinks() == []
    assert TWO_CYCLE.sink is None


def test_references_are_unique_in_order_and_tolerate_whitespace():
    agent = cot("C", "compare ${B} with ${ A } and again ${B}")
    assert agent.references() == ["B", "A"]
    assert cot("A", "plain text, no $ {x}").references() == []


def test_direct_answer_only_without_agents():
    assert Orchestration(dom=DoM.LOW, answer="42").direct_answer == "42"
    assert chain("A").direct_answer is None


def test_to_dict_is_plain_json_with_the_format():
    o = Orchestration(
        agents=(Agent("D", "DebateAgent", debate_roles=("Pro", "Con")), cot("B", "${D}")),
        edges=(Edge("D", "B"),),
        thinking="why",
        answer="B",
    )
    d = o.to_dict()
    assert json.loads(json.dumps(d)) == d  # no tuple or enum survives as such
    assert d["format"] == ORCHRM_JSON_FORMAT
    assert d["dom"] == "high"
    assert d["edges"] == [["D", "B"]]


# --------------------------------------------------------------------------- harmony XML


def test_high_dom_harmony_writes_agent_ids_and_one_edge_block():
    single = to_harmony(Orchestration(agents=(cot("solo"),), answer="solo"))
    assert "<agent_id>solo</agent_id>" in single
    assert single.count("<edge>") == 1
    pair = to_harmony(chain("A", "B"))
    assert pair.count("<edge>") == 1
    assert "<from>A</from><to>B</to>" in pair


def test_low_dom_harmony_writes_no_agent_id_and_no_edge():
    text = to_harmony(VALID["low DoM single agent"])
    assert "<agent_output_id>geo_out</agent_output_id>" in text
    assert "<agent_id>" not in text
    assert "<edge>" not in text


@pytest.mark.parametrize(
    "o",
    [
        Orchestration(agents=(cot("A"),), thinking="done < / Thinking > early"),
        Orchestration(agents=(cot("A", "see <answer>"),)),
        Orchestration(agents=(Agent("A", "CoTAgent", description="< /Edge >"),)),
        Orchestration(agents=(cot("A"),), thinking=f"x {FINAL_MARKERS[0]} y"),
        Orchestration(dom=DoM.LOW, answer=f"{FINAL_MARKERS[-1]}42"),
    ],
)
def test_harmony_refuses_text_that_would_read_back_differently(o):
    with pytest.raises(ValueError):
        to_harmony(o)


def test_harmony_thinking_may_mention_tags_other_than_its_own_end():
    o = Orchestration(agents=(cot("A"),), thinking="I will fill <agent_input> with ${x}.")
    assert "I will fill <agent_input> with ${x}." in to_harmony(o)


# --------------------------------------------------------------------------- reward-model text

QUESTION = "What is the smallest prime larger than 100?"
DEBATE = Orchestration(
    agents=(
        Agent("D", "DebateAgent", "argue it out", "${A}", debate_roles=("Pro", "Con")),
        cot("A", description="first attempt"),
    ),
    edges=(Edge("A", "D"),),
    thinking="A debate settles it. " * 200,
    answer="D",
)
STRUCTURE = [
    "agent A = CoTAgent (step-by-step chain of thought)",
    "agent D = DebateAgent (debate between experts) [roles: Pro | Con]",
    "edges: A->D",
]


def test_rm_render_version_is_a_nonempty_string():
    assert isinstance(RM_RENDER_VERSION, str)
    assert RM_RENDER_VERSION


def test_render_names_each_known_type_in_words_and_leaves_others_bare():
    for kind, words in TYPE_NAMES.items():
        o = Orchestration(agents=(Agent("X", kind, "", ""),))
        assert f"agent X = {kind} ({words})" in render_for_rm(QUESTION, o, 10_000)
    odd = Orchestration(agents=(Agent("X", "PlannerAgent", "", ""),))
    assert "agent X = PlannerAgent\n" in render_for_rm(QUESTION, odd, 10_000)


def test_render_is_deterministic():
    assert render_for_rm(QUESTION, DEBATE, 10_000) == render_for_rm(QUESTION, DEBATE, 10_000)


def test_render_puts_structure_before_thinking_in_topological_order():
    lines = render_for_rm(QUESTION, DEBATE, 10_000).splitlines()
    assert lines[-1].startswith("thinking: A debate settles it.")
    a, d = lines.index(STRUCTURE[0]), lines.index(STRUCTURE[1])
    assert a < d < lines.index(STRUCTURE[2])  # A runs first although D is declared first
    assert lines[a + 1] == "  input: (original question)"
    assert lines[d + 1] == "  input: ${A}"


def test_render_ignores_whitespace_in_thinking_and_description():
    tidy = Orchestration(agents=(cot("A", description="one two"),), thinking="a b c")
    messy = Orchestration(agents=(cot("A", description=" one\n\ttwo "),), thinking="a\n\n b  c")
    assert render_for_rm(QUESTION, tidy) == render_for_rm(QUESTION, messy)


def test_render_cuts_thinking_first_to_fit_the_budget():
    no_thinking = Orchestration(agents=DEBATE.agents, edges=DEBATE.edges, answer="D")
    budget = approx_token_count(render_for_rm(QUESTION, no_thinking)) + 20
    text = render_for_rm(QUESTION, DEBATE, max_tokens=budget)
    assert approx_token_count(text) <= budget
    lines = text.splitlines()
    assert lines[-1].startswith("thinking: A debate settles it.")
    assert lines[-1].endswith("...")
    assert f"question: {QUESTION}" in lines
    assert "  about: argue it out" in lines
    assert all(line in lines for line in STRUCTURE)


def test_render_never_cuts_types_roles_and_edges():
    lines = render_for_rm(QUESTION, DEBATE, max_tokens=1).splitlines()
    assert all(line in lines for line in STRUCTURE)


def test_cut_agent_input_is_not_shown_as_the_original_question():
    lines = render_for_rm(QUESTION, DEBATE, max_tokens=1).splitlines()
    d = lines.index(STRUCTURE[1])
    assert lines[d + 1] != "  input: (original question)"


def test_render_honours_a_custom_token_counter():
    by_chars = render_for_rm(QUESTION, DEBATE, max_tokens=360, count_tokens=len)
    assert len(by_chars) <= 360
    assert len(render_for_rm(QUESTION, DEBATE, max_tokens=360)) > 360
    assert all(line in by_chars.splitlines() for line in STRUCTURE)


def test_rm_text_is_a_shared_prompt_plus_the_orchestration_part():
    long_question = "Find the value. " * 300
    one = Orchestration(agents=(cot("A"),), dom=DoM.HIGH, thinking="why " * 400)
    two = Orchestration(agents=(cot("A"), cot("B", "use ${A}")), edges=(Edge("A", "B"),))
    prompt = rm_prompt(long_question, 256)
    for o in (one, two):
        text = render_for_rm(long_question, o, max_tokens=256)
        assert text == prompt + rm_completion(o, 256 - approx_token_count(prompt))
        assert text.startswith(prompt) and approx_token_count(text) <= 256
    # The question keeps its head within half the budget; the plan gets the rest.
    assert approx_token_count(prompt) <= 128 and prompt.startswith("question: Find the value.")
    assert prompt.endswith("...\n")


@pytest.mark.parametrize("budget", [1, 24, 48, 80, 200])
def test_cutting_by_token_ends_gives_the_text_counting_gives(budget):
    """The default counter cuts by its token ends; a plain callable counting the same
    tokens cuts by a search over word prefixes. Both give one text."""
    long_question = "Which prime follows 100, and why? " * 20

    def plain(text: str) -> int:
        return approx_token_count(text)

    for o in (DEBATE, chain("A", "B", "C")):
        assert render_for_rm(long_question, o, budget, plain) == render_for_rm(
            long_question, o, budget
        )


def test_a_tokenizers_offsets_cut_where_its_counts_cut():
    from transformers import AutoTokenizer

    from orchrm.rmodel.tokens import TokenizerCounter, default_backbone

    tokenizer = AutoTokenizer.from_pretrained(default_backbone())
    with_ends = TokenizerCounter(tokenizer)
    assert with_ends.token_ends("a dog's bone") == [1, 5, 6, 7, 12]

    def plain(text: str) -> int:
        return with_ends(text)

    for budget in (1, 30, 60, 120):
        assert render_for_rm(QUESTION * 9, DEBATE, budget, with_ends) == render_for_rm(
            QUESTION * 9, DEBATE, budget, plain
        )
