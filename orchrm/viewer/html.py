"""The HTML of `orchrm view`: one page with its CSS, JS and SVG inline.

The page loads nothing: a Content-Security-Policy allows no source at all but its own
script (by hash) and inline styles, so even a text that escaped escaping could neither
run nor fetch anything. Every text from a log goes through `view_graph.esc`. Each task
is a `<section class="task">` whose `data-*` attributes hold what the page sorts and
filters on; a plan a selector made in place of the candidates (`orchrm-search`'s edit)
is an `<article class="cand edited">` right after the candidate it came from, with the
edits that made it. The script only reorders and hides sections, and reports on
`#view-status` (`data-state="ready"` once it ran, `data-errors` with any error it met,
`data-shown`: the tasks the filters let through). The filters can be set from the
link: `view.html#domain=math&wrong=1&disagree=1&sort=share&q=text`.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re

from orchrm.orchestration import validate
from orchrm.selection.registry import REGISTRY, colour, label
from orchrm.tasks.grading import answer_key
from orchrm.viewer.graph import (
    ARROW_DEFS,
    OTHER_TYPE_COLOUR,
    TYPE_COLOURS,
    drawn_width,
    esc,
    svg,
)

CARD_W, CARD_MAX_W, CARD_EDGES = 352, 1000, 16
"""A candidate card's width in pixels, the widest it grows to fit its graph (a chain of
five agents fits), and its padding and border on both sides: a graph up to
`CARD_MAX_W` is drawn at full size, so node text stays 12 and 10 px; a wider one scales
down (and any card scales to a narrow window)."""

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f6f4;color:#222}
header.page{padding:12px 18px;background:#fff;border-bottom:1px solid #ccc}
h1{font-size:18px;margin:0 0 6px}
.legend span,.badge{display:inline-block;padding:1px 7px;border-radius:9px;margin:2px 3px 2px 0;
color:#fff;font-size:12px;white-space:nowrap}
.controls{position:sticky;top:0;z-index:2;background:#fffdf2;padding:8px 18px;
border-bottom:1px solid #ccc;display:flex;flex-wrap:wrap;gap:14px;align-items:center}
.controls label{white-space:nowrap}
div.scroll{overflow-x:auto;margin-top:6px;max-width:100%}
table.summary{border-collapse:collapse;font-size:12px}
table.summary td,table.summary th{border:1px solid #ddd;padding:2px 8px;text-align:right}
table.summary td:first-child,table.summary th:first-child{text-align:left}
main{padding:10px 18px}
section.task{background:#fff;border:1px solid #ccc;border-radius:6px;margin:0 0 14px;
padding:8px 12px}
section.task h2{font-size:15px;margin:0}
.q{margin:4px 0;white-space:pre-wrap;overflow-wrap:anywhere}
.meta{color:#555;font-size:12px}
.cands{display:flex;flex-wrap:wrap;gap:10px;margin-top:8px}
article.cand{border:2px solid #bbb;border-radius:6px;padding:6px;width:352px;max-width:100%;
box-sizing:border-box;background:#fafafa}
article.cand.right{border-color:#3a9a3a}
article.cand.wrong{border-color:#c03a3a}
article.cand.edited{border-style:dashed;background:#f3f7ee}
ol.edits{font-size:12px;margin:2px 0;padding-left:18px;overflow-wrap:anywhere}
article.cand header{font-size:13px}
.verdict.right{color:#2a7a2a;font-weight:600}.verdict.wrong{color:#b02a2a;font-weight:600}
.facts{font-size:12px;color:#333;margin:2px 0;overflow-wrap:anywhere}
.graph{display:block;max-width:100%;height:auto}
.graph text{text-anchor:middle;font-size:12px;fill:#fff;pointer-events:none}
.graph text.ty{font-size:10px}.graph text.dark{fill:#222}
.graph text.sinktag{text-anchor:end;font-size:9px;font-weight:700}
.graph path.edge{fill:none;stroke:#333;stroke-width:1.5}
.graph g.node:hover rect,.graph g.node:focus rect{stroke:#000;stroke-width:3}
.problem{color:#a33;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere;max-width:420px}
.best{font-weight:700}
.problems{color:#a33;font-size:12px}
#view-status{padding:6px 18px;color:#555;font-size:12px}
"""

SCRIPT = """
(function () {
  var status = document.getElementById('view-status');
  var errors = [];
  function fail(message) {
    errors.push(String(message));
    status.setAttribute('data-errors', errors.join(' | '));
  }
  window.addEventListener('error', function (e) { fail(e.message || e); });
  try {
    var main = document.getElementById('tasks');
    var tasks = Array.prototype.slice.call(main.querySelectorAll('section.task'));
    var domain = document.getElementById('f-domain');
    var wrong = document.getElementById('f-wrong');
    var disagree = document.getElementById('f-disagree');
    var search = document.getElementById('f-search');
    var sort = document.getElementById('f-sort');
    var counter = document.getElementById('shown');
    function num(el, key, missing) {
      var v = parseFloat(el.getAttribute('data-' + key));
      return isNaN(v) ? missing : v;
    }
    var orders = {
      file: function (a, b) { return num(a, 'order', 0) - num(b, 'order', 0); },
      id: function (a, b) {
        return a.getAttribute('data-task') < b.getAttribute('data-task') ? -1 : 1;
      },
      domain: function (a, b) {
        var x = a.getAttribute('data-domain'), y = b.getAttribute('data-domain');
        return x === y ? orders.file(a, b) : (x < y ? -1 : 1);
      },
      share: function (a, b) { return num(a, 'share', 2) - num(b, 'share', 2); },
      spread: function (a, b) { return num(b, 'spread', -1) - num(a, 'spread', -1); },
      p: function (a, b) { return num(a, 'p', 2) - num(b, 'p', 2); }
    };
    function apply() {
      var shown = 0, text = search.value.toLowerCase();
      tasks.sort(orders[sort.value] || orders.file);
      tasks.forEach(function (t) {
        var keep = (!domain.value || t.getAttribute('data-domain') === domain.value) &&
          (!wrong.checked || t.getAttribute('data-orchrm-wrong') === '1') &&
          (!disagree.checked || t.getAttribute('data-disagree') === '1') &&
          (!text || t.textContent.toLowerCase().indexOf(text) >= 0);
        t.hidden = !keep;
        if (keep) { shown += 1; }
        main.appendChild(t);
      });
      counter.textContent = String(shown);
      status.setAttribute('data-shown', String(shown));
    }
    var preset = {};
    location.hash.replace(/^#/, '').split('&').forEach(function (pair) {
      var i = pair.indexOf('=');
      if (i > 0) {
        try {
          preset[decodeURIComponent(pair.slice(0, i))] = decodeURIComponent(pair.slice(i + 1));
        } catch (e) { /* a malformed link sets nothing */ }
      }
    });
    if (preset.domain !== undefined) { domain.value = preset.domain; }
    wrong.checked = preset.wrong === '1' && !wrong.disabled;
    disagree.checked = preset.disagree === '1' && !disagree.disabled;
    if (preset.sort && orders[preset.sort]) { sort.value = preset.sort; }
    if (preset.q) { search.value = preset.q; }
    [domain, wrong, disagree, sort].forEach(function (el) {
      el.addEventListener('change', apply);
    });
    search.addEventListener('input', apply);
    apply();
    status.setAttribute('data-nodes', String(document.querySelectorAll('g.node').length));
    status.setAttribute('data-edges', String(document.querySelectorAll('path.edge').length));
    status.setAttribute('data-state', 'ready');
  } catch (e) {
    fail(e && e.message ? e.message : e);
    status.setAttribute('data-state', 'failed');
  }
})();
"""


def _script_hash(script: str) -> str:
    return base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def content_policy(script: str = SCRIPT) -> str:
    """The page's Content-Security-Policy: nothing may load; only `script` may run."""
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
        f"form-action 'none'; script-src 'sha256-{_script_hash(script)}'"
    )


def _badge(name: str, extra: str = "") -> str:
    return (
        f'<span class="badge" data-selector="{esc(name)}" '
        f'style="background:{colour(name) or "#555"}">{esc(label(name))}{extra}</span>'
    )


def _chosen_answer(view, name: str) -> str | None:
    chosen = view.chosen(name)
    return None if chosen is None else answer_key(chosen.answer, view.task.domain)


def task_flags(view) -> dict[str, str]:
    """The `data-*` attributes a task's section is sorted and filtered on."""
    cands = view.task.candidates
    pick = view.picks.get("orchrm")
    flags = {
        "task": view.task.task_id,
        "domain": view.task.domain or "",
        "share": f"{sum(c.correct for c in cands) / len(cands):.4f}" if cands else "",
        "orchrm-wrong": "" if pick is None else ("0" if cands[pick].correct else "1"),
        "disagree": "",
        "spread": "",
        "p": "",
    }
    if pick is not None and "majority" in view.picks:
        same = _chosen_answer(view, "orchrm") == _chosen_answer(view, "majority")
        flags["disagree"] = "0" if same else "1"
    scores = [s for s in view.scores if s is not None and math.isfinite(s)]
    if scores:
        flags["spread"] = f"{max(scores) - min(scores):.6f}"
    if pick is not None and cands[pick].p_success is not None:
        flags["p"] = f"{cands[pick].p_success:.4f}"
    return flags


def _facts(view, i: int, c) -> str:
    facts = [f"answer: <b>{esc(c.answer, 80)}</b>" if c.answer is not None else "no answer"]
    if c.p_success is not None:
        facts.append(f"p(success) {c.p_success:.2f}")
    score = view.score(i)
    if score is not None:
        best = max((s for s in view.scores if s is not None), default=None)
        cls = ' class="best"' if score == best else ""
        facts.append(f'<span{cls} data-score="{score:.6g}">RM score {score:.3f}</span>')
    if c.logprob is not None:
        facts.append(f"logp {c.logprob:.1f}")
    if c.execution_tokens:
        facts.append(f"{c.execution_tokens:,} tokens")
    return '<p class="facts">' + " · ".join(facts) + "</p>"


def _ran(c) -> bool:
    """Whether the plan has an outcome (a logged candidate, or an edit the world ran)."""
    return c.answer is not None or c.correct or c.execution_tokens > 0


def _edited(view, name: str, e) -> str:
    """The plan selector `name` made from candidate `e.source`, drawn beside it."""
    c = e.plan
    verdict = ("right" if c.correct else "wrong") if _ran(c) else "unrun"
    said = {"right": "✓ right", "wrong": "✗ wrong", "unrun": "not executed"}[verdict]
    facts = [f"answer: <b>{esc(c.answer, 80)}</b>" if c.answer is not None else "no answer"]
    if c.p_success is not None:
        facts.append(f"p(success) {c.p_success:.2f}")
    if e.score is not None:
        facts.append(f"objective {e.score:.3f}")
    if c.execution_tokens:
        facts.append(f"{c.execution_tokens:,} tokens")
    steps = "".join(f"<li>{esc(step, 200)}</li>" for step in e.edits)
    return (
        f'<article class="cand edited {verdict}" data-edited="{esc(name)}" '
        f'data-from="{e.source}" data-correct="{int(c.correct)}"{card_width(c)}>'
        f"<header><b>edit of #{e.source}</b> "
        f'<span class="verdict {verdict}">{said}</span></header>'
        f'<div class="picks">{_badge(name)}</div>'
        f'<p class="facts">{" · ".join(facts)}</p>'
        f'<ol class="edits">{steps}</ol>{svg(c.orchestration)}</article>'
    )


def card_width(c) -> str:
    """The style of a card whose graph is wider than `CARD_W` leaves room for: its width
    grown to draw the graph at full size, up to `CARD_MAX_W` ('' for the others)."""
    if c.orchestration is None:
        return ""
    needed = math.ceil(drawn_width(c.orchestration)) + CARD_EDGES
    return f' style="width:{min(needed, CARD_MAX_W)}px"' if needed > CARD_W else ""


_INDEXED = re.compile(r"(.*) #(\d+|\?)")


def who(view, i: int) -> str:
    """Candidate `i`'s label without the index its card already shows: `specialized #3`
    on card #3 is `specialized`; a label naming another sample keeps it as `sample 5`."""
    label = view.label(i)
    found = _INDEXED.fullmatch(label)
    if label == f"#{i}":
        return ""
    if found is None or found[2] == "?":
        return label
    return found[1] if found[2] == str(i) else f"{found[1]} (sample {found[2]})"


def _candidate(view, i: int, c) -> str:
    verdict = "right" if c.correct else "wrong"
    pickers = [n for n, index in view.picks.items() if index == i and n not in view.edited]
    parts = [
        f'<article class="cand {verdict}" data-index="{i}" data-correct="{int(c.correct)}"'
        f"{card_width(c)}>",
        f"<header><b>#{i}</b> {esc(who(view, i), 60)} "
        f'<span class="verdict {verdict}">{"✓ right" if c.correct else "✗ wrong"}</span></header>',
        '<div class="picks">' + "".join(_badge(p) for p in pickers) + "</div>",
        _facts(view, i, c),
    ]
    if c.orchestration is None:
        problem = view.problem(i) or "no orchestration"
        parts.append(f'<p class="problem">unparseable: {esc(problem, 600)}</p>')
    else:
        parts.append(svg(c.orchestration))
        broken = validate(c.orchestration)
        if broken:
            said = "; ".join(v.message for v in broken)
            parts.append(
                f'<p class="problem" title="{esc(said, 2000)}">breaks {len(broken)} '
                f"rule(s): {esc(said, 200)}</p>"
            )
    parts.append("</article>")
    return "".join(parts)


def _task(view, order: int) -> str:
    flags = {**task_flags(view), "order": str(order)}
    attrs = " ".join(f'data-{k}="{esc(v)}"' for k, v in flags.items())
    cands = view.task.candidates
    picks = []
    for name, index in view.picks.items():
        mark = "✓" if view.chosen(name).correct else "✗"
        where = f"an edit of #{index}" if name in view.edited else f"#{index}"
        picks.append(_badge(name, f" → {where} {mark}"))
    drawn = []
    for i, c in enumerate(cands):
        drawn.append(_candidate(view, i, c))
        drawn += [_edited(view, name, e) for name, e in view.edited.items() if e.source == i]
    truth = f" · reference answer: <b>{esc(view.ground_truth, 80)}</b>" if view.ground_truth else ""
    right = sum(c.correct for c in cands)
    return (
        f'<section class="task" {attrs}><h2>{esc(view.task.task_id, 120)}</h2>'
        f'<p class="meta">{esc(view.task.domain or "no domain")} · {len(cands)} candidates, '
        f"{right} right{truth}</p>"
        f'<p class="q" title="{esc(view.task.question, 4000)}">{esc(view.task.question, 600)}</p>'
        f'<div class="picks">picked: {"".join(picks) or "nothing"}</div>'
        f'<div class="cands">{"".join(drawn)}</div>'
        "</section>"
    )


def summary_rows(tasks) -> list[tuple[str, int, int, float | None]]:
    """(selector, tasks it picked on, picks right, mean true success probability of its
    picks or None) in registry order, then the others by name."""
    names = {n for v in tasks for n in v.picks}
    ordered = [e.name for e in REGISTRY if e.name in names] + sorted(
        names - {e.name for e in REGISTRY}
    )
    rows = []
    for name in ordered:
        chosen = [v.chosen(name) for v in tasks if name in v.picks]
        ps = [c.p_success for c in chosen]
        p = sum(ps) / len(ps) if ps and all(x is not None for x in ps) else None
        rows.append((name, len(chosen), sum(c.correct for c in chosen), p))
    return rows


def _summary(tasks) -> str:
    """A row per selector: its picks that were right and, on world logs, the mean true
    success probability of its picks. Rows, not columns: the registry's selectors side
    by side would not fit a window."""
    rows = summary_rows(tasks)
    if not rows:
        return ""
    has_p = any(p is not None for *_, p in rows)
    head = "<tr><th>selector</th><th>picks right</th>"
    head += "<th>mean p(success) of picks</th></tr>" if has_p else "</tr>"
    lines = [head]
    for name, count, right, p in rows:
        cells = f"<td>{_badge(name)}</td><td>{right}/{count}</td>"
        if has_p:
            cells += f"<td>{'-' if p is None else f'{p:.3f}'}</td>"
        lines.append(f"<tr>{cells}</tr>")
    return f'<div class="scroll"><table class="summary">{"".join(lines)}</table></div>'


def _controls(tasks) -> str:
    domains = sorted({v.task.domain or "" for v in tasks})
    options = "".join(f'<option value="{esc(d)}">{esc(d or "(none)")}</option>' for d in domains)
    has_rm = any("orchrm" in v.picks for v in tasks)
    off = "" if has_rm else " disabled"
    sorts = (
        ("file", "as read"),
        ("id", "task id"),
        ("domain", "domain"),
        ("share", "fewest right first"),
        ("spread", "widest RM score spread first"),
        ("p", "orchrm pick's lowest p(success) first"),
    )
    sort_options = "".join(f'<option value="{k}">{t}</option>' for k, t in sorts)
    return (
        '<div class="controls">'
        f'<label>domain <select id="f-domain"><option value="">all</option>{options}</select>'
        "</label>"
        f'<label><input type="checkbox" id="f-wrong"{off}> orchrm picked a wrong one</label>'
        f'<label><input type="checkbox" id="f-disagree"{off}> orchrm disagrees with majority'
        "</label>"
        '<label>search <input type="search" id="f-search" size="18"></label>'
        f'<label>sort <select id="f-sort">{sort_options}</select></label>'
        f'<span><span id="shown">{len(tasks)}</span> of {len(tasks)} tasks shown</span>'
        "</div>"
    )


def _legend() -> str:
    types = "".join(
        f'<span style="background:{c}">{esc(t)}</span>' for t, c in TYPE_COLOURS.items()
    )
    return (
        f'<div class="legend">sub-agents: {types}<span style="background:{OTHER_TYPE_COLOUR}">'
        "other</span> · the sink (its output is the answer) has a thick border; hover an agent "
        "for its description, input and roles</div>"
    )


def render_page(tasks, *, title: str, problems=(), left_out: int = 0) -> str:
    """The whole page for `ViewTask`s: legend, selector summary, controls, a section per
    task, and `problems` (what could not be read) listed at the top."""
    problems = list(problems)
    notes = ""
    if problems:
        items = "".join(f"<li>{esc(p, 300)}</li>" for p in problems[:20])
        more = f"<li>… and {len(problems) - 20} more</li>" if len(problems) > 20 else ""
        notes = f'<ul class="problems">{len(problems)} records left out: {items}{more}</ul>'
    if left_out:
        notes += f'<p class="meta">{left_out} more tasks left out (--max-tasks).</p>'
    sections = "".join(_task(v, i) for i, v in enumerate(tasks))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{content_policy()}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title, 200)}</title><style>{CSS}</style></head><body>"
        f'{ARROW_DEFS}<header class="page"><h1>{esc(title, 200)}</h1>{_legend()}'
        f"{_summary(tasks)}{notes}</header>{_controls(tasks)}"
        f'<main id="tasks">{sections}</main>'
        '<div id="view-status" data-state="loading" data-errors=""></div>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )
