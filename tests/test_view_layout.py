"""The view page as a reader sees it: each card names its candidate's index once, the
selector summary fits a 1,300 px window whatever the number of selectors, and a chain's
node text is drawn at full size."""

from __future__ import annotations

import re

from orchrm.orchestration import Agent, Edge, Orchestration
from orchrm.selection.registry import REGISTRY
from orchrm.selection.selectors import Candidate, CandidateSet
from orchrm.viewer.graph import NODE_W, drawn_width
from orchrm.viewer.html import CARD_EDGES, CARD_MAX_W, CARD_W, render_page
from orchrm.viewer.task import ViewTask


def chain(n: int) -> Orchestration:
    agents = tuple(Agent(f"agent{i}", "CoTAgent") for i in range(n))
    edges = tuple(Edge(f"agent{i}", f"agent{i + 1}") for i in range(n - 1))
    return Orchestration(agents=agents, edges=edges, answer=f"agent{n - 1}")


def page(labels: tuple[str, ...], sizes=(1, 3), picks=None) -> str:
    cands = tuple(Candidate(chain(n), answer="4", correct=i == 0) for i, n in enumerate(sizes))
    task = ViewTask(
        CandidateSet("t1", "Add 2 and 2.", cands, "math"),
        labels=labels,
        picks=picks if picks is not None else {"majority": 0},
    )
    return render_page([task], title="t")


def headers(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<header><b>.*?</header>", html)]


def test_a_card_names_its_index_once():
    assert headers(page(("#0", "#1"))) == ["#0  ✓ right", "#1  ✗ wrong"]
    assert headers(page(("specialized #0", "base #1"))) == [
        "#0 specialized ✓ right",
        "#1 base ✗ wrong",
    ]
    assert headers(page(("specialized #4", "? #?"))) == [
        "#0 specialized (sample 4) ✓ right",
        "#1 ? #? ✗ wrong",
    ]
    for header in headers(page(("#0", "#1"))):
        assert len(re.findall(r"#\d", header)) == 1, header


def test_the_summary_is_a_row_per_selector_that_fits_1300_px():
    picks = {e.name: 0 for e in REGISTRY}
    html = page(("#0", "#1"), picks=picks)
    table = re.search(r'<table class="summary">(.*?)</table>', html)[1]
    rows = re.findall(r"<tr>(.*?)</tr>", table)
    assert len(rows) == 1 + len(REGISTRY) >= 14
    for row in rows:
        assert len(re.findall(r"<t[dh]>", row)) <= 3, row
    # the widest row: the longest selector badge and two short numbers, far below 1,300 px
    longest = max(len(e.name) for e in REGISTRY)
    assert longest * 8 + 2 * 200 < 1300
    assert "white-space:nowrap}" not in html.split("table.summary{", 1)[1].split("\n", 1)[0]


def test_a_three_agent_chain_is_drawn_at_full_size():
    html = page(("#0", "#1"), sizes=(1, 3))
    cards = re.findall(r'<article class="cand[^"]*"[^>]*>.*?<svg class="graph"[^>]*>', html)
    widths = []
    for card in cards:
        drawn = float(re.search(r'<svg class="graph" viewBox="0 0 (\d+) ', card)[1])
        style = re.search(r'style="width:(\d+)px"', card.split(">", 1)[0])
        room = (int(style[1]) if style else CARD_W) - CARD_EDGES
        widths.append((drawn, room))
        assert drawn <= room, card[:200]  # no scaling: 12 px ids, 10 px types
    assert widths[1][0] == drawn_width(chain(3)) > CARD_W - CARD_EDGES
    assert drawn_width(chain(5)) + CARD_EDGES <= CARD_MAX_W  # five agents still fit
    assert NODE_W >= 120  # room for an id of 18 characters at 12 px
