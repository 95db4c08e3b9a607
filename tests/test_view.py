"""`orchrm view`: the page from world logs, stores and evaluation folders; untrusted log
text escaped; nothing referenced on the network; rendered in headless Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from orchrm.errors import InputError
from orchrm.evaluation.loading import tasks_from_logs
from orchrm.jsonl import write_jsonl
from orchrm.orchestration import RM_RENDER_VERSION, Agent, Edge, Orchestration, render_for_rm
from orchrm.parse import parse_harmony
from orchrm.rmodel.files import METADATA
from orchrm.selection.selectors import first_max, majority_selector, oracle_selector
from orchrm.viewer.graph import layers, layout
from orchrm.viewer.json_form import read_view_json, view_json_of
from orchrm.viewer.page import (
    build_view,
    pick_all,
    read_logs,
    selections,
    write_evaluation_view,
    write_view,
)
from orchrm.world.generate import generate
from tests.samples import HIGH_DOM, tiny_decoder

HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>\"'&"
KNOWN = "known-task"


def _record(base: dict, sample: int, **changes) -> dict:
    return {**base, "task_id": KNOWN, "sample_index": sample, "orchestrator": HOSTILE, **changes}


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> tuple[Path, Path]:
    """(a world log of 3 math tasks, 2 orchestrators x 2 samples; a log of one task of
    ours whose every text is hostile, with an unparseable candidate and two bad lines)."""
    folder = tmp_path_factory.mktemp("view")
    records = generate("math", 3, 2, 0).records
    write_jsonl(records, folder / "world.jsonl")
    base = {**records[0], "question": "Add 2 and 2. " + HOSTILE, "ground_truth": HOSTILE}
    hostile_plan = Orchestration(
        agents=(Agent("Bad", "DebateAgent", HOSTILE, HOSTILE, (HOSTILE, "b")),), answer=None
    )
    ours = [
        _record(
            base,
            0,
            orchestration=parse_harmony(HIGH_DOM).to_dict(),
            answer="4",
            correct=True,
            world={"p_success": 0.9},
        ),
        _record(base, 1, orchestration=hostile_plan.to_dict(), answer=HOSTILE, correct=False),
        _record(base, 2, orchestration=None, parse_error=HOSTILE, answer=None, correct=False),
    ]
    hostile = folder / "hostile.jsonl"
    lines = [json.dumps(r) for r in ours] + ["{not json", json.dumps({"hello": HOSTILE})]
    hostile.write_text("\n".join(lines) + "\n")
    return folder / "world.jsonl", hostile


class Tags(HTMLParser):
    """Every start tag with its attributes, the task section it sits in, and the text of
    script and style elements."""

    def __init__(self, page: str):
        super().__init__()
        self.tags: list[tuple[str, dict, str | None]] = []
        self.code: list[str] = []
        self._task: str | None = None
        self._in_code = False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self._task = attrs.get("data-task")
        self._in_code = tag in ("script", "style")
        self.tags.append((tag, attrs, self._task))

    def handle_endtag(self, tag):
        self._in_code = False

    def handle_data(self, data):
        if self._in_code:
            self.code.append(data)

    def of(self, task: str, tag: str, **attrs) -> list[dict]:
        return [
            a
            for t, a, where in self.tags
            if t == tag and where == task and all(a.get(k) == v for k, v in attrs.items())
        ]


def assert_loads_nothing(page: str) -> Tags:
    """No tag may reference a URL and no script or style may fetch one: no `src`,
    `href`, `action`, `srcset` or `poster` attribute, no http(s) address, no `url()`
    except the page's own `#fragment`, no `fetch`, `XMLHttpRequest`, `import`."""
    assert "http://" not in page and "https://" not in page
    parsed = Tags(page)
    for tag, attrs, _ in parsed.tags:
        assert not {"src", "href", "action", "srcset", "poster", "xlink:href"} & attrs.keys(), tag
        for value in attrs.values():
            assert "url(" not in (value or "") or "url(#" in value, (tag, value)
    code = "".join(parsed.code)
    for word in ("fetch(", "XMLHttpRequest", "import", "url(", "WebSocket", "sendBeacon"):
        assert word not in code, word
    return parsed


def test_the_page_draws_each_plan_and_escapes_every_log_text(logs):
    page = build_view(list(logs))
    parsed = assert_loads_nothing(page)
    assert HOSTILE not in page and "<script>alert" not in page
    assert page.count("<script") == 1 and "&lt;script&gt;alert(" in page
    assert [t for t, *_ in parsed.tags].count("script") == 1
    assert not any(t == "img" or "onerror" in a for t, a, _ in parsed.tags)
    # the known plan: Parse -> Solve, Solve the sink; the hostile roles sit in its title
    assert parsed.of(KNOWN, "g", **{"data-agent": "Parse", "class": "node"})
    assert parsed.of(KNOWN, "g", **{"data-agent": "Solve", "class": "node sink"})
    assert parsed.of(KNOWN, "path", **{"data-from": "Parse", "data-to": "Solve"})
    assert len(parsed.of(KNOWN, "article")) == 3
    assert parsed.of(KNOWN, "article", **{"data-index": "0", "data-correct": "1"})
    assert "2 records left out" in page  # the bad line and the record that is no run record
    # every world task is there with its 4 candidates and the log-only selectors' picks
    for task_id in {r["task_id"] for r in generate("math", 3, 2, 0).records}:
        assert len(parsed.of(task_id, "article")) == 4
    assert {"majority", "random", "logp", "oracle", "bayes"} <= {
        a["data-selector"] for t, a, _ in parsed.tags if t == "span" and "data-selector" in a
    }


def test_layers_follow_the_longest_path_and_a_cycle_goes_one_a_layer():
    diamond = Orchestration(
        agents=tuple(Agent(i, "CoTAgent") for i in "ABCD"),
        edges=(Edge("A", "B"), Edge("A", "C"), Edge("B", "D"), Edge("C", "D"), Edge("A", "D")),
    )
    assert layers(diamond) == {"A": 0, "B": 1, "C": 1, "D": 2}
    placed = layout(diamond)
    assert placed.nodes["B"].x == placed.nodes["C"].x < placed.nodes["D"].x
    assert placed.nodes["B"].y != placed.nodes["C"].y and len(placed.edges) == 5
    cycle = Orchestration(
        agents=(Agent("A", "CoTAgent"), Agent("B", "SCAgent")),
        edges=(Edge("A", "B"), Edge("B", "A"), Edge("A", "Nobody")),
    )
    assert layers(cycle) == {"A": 0, "B": 1} and layout(cycle).edges == (("A", "B"), ("B", "A"))


def _shown(c) -> tuple:
    """What the page shows of a candidate, so what view.json keeps."""
    return (c.orchestration, c.answer, c.correct, c.p_success, c.logprob, c.execution_tokens)


def test_an_evaluation_folder_round_trips_its_picks(logs, tmp_path):
    tasks = tasks_from_logs([str(logs[0])], n=4)
    chosen = selections(tasks, {"majority": majority_selector, "oracle": oracle_selector})
    write_evaluation_view(tmp_path / "eval", tasks, chosen)
    (tmp_path / "eval" / "report.json").write_text(json.dumps({"evaluations": []}))
    for source in ("eval", "eval/view.json", "eval/report.json"):
        back = read_view_json(view_json_of(tmp_path / source))
        assert [v.picks for v in back] == [{k: s.index for k, s in c.items()} for c in chosen]
        assert [list(map(_shown, v.task.candidates)) for v in back] == [
            list(map(_shown, t.candidates)) for t in tasks
        ]
        assert "oracle → #" in build_view([tmp_path / source])
    # N cuts candidates, and the picks among the cut ones
    cut = read_view_json(tmp_path / "eval" / "view.json", n=1)
    assert all(len(v.task.candidates) == 1 and set(v.picks.values()) <= {0} for v in cut)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "report.json").write_text(json.dumps({"evaluations": []}))
    for source in (bare, bare / "report.json"):
        with pytest.raises(InputError, match=r"without .*per-task picks"):
            build_view([source])
    (bare / "view.json").write_text(
        json.dumps({"format": "orchrm.view/1", "tasks": [{"picks": {"x": 7}}]})
    )
    with pytest.raises(InputError, match=r"tasks\[0\]\.picks\.x is 7"):
        build_view([bare / "view.json"])


def test_a_store_gives_the_same_tasks_as_its_log(logs, tmp_path):
    from orchrm.store.db import Store
    from orchrm.store.ingest import ingest_file

    with Store(tmp_path / "s.duckdb") as db:
        ingest_file(db, logs[0])
    from_store = Tags(build_view([tmp_path / "s.duckdb"]))
    from_log = Tags(build_view([logs[0]]))
    for page in (from_store, from_log):
        assert len([1 for t, a, _ in page.tags if t == "section"]) == 3
    right = lambda p: sorted(a["data-correct"] for t, a, _ in p.tags if t == "article")  # noqa: E731
    assert right(from_store) == right(from_log)


@pytest.fixture(scope="module")
def rm_dir(logs, tmp_path_factory) -> Path:
    """A tiny random decoder reward model with orchrm metadata."""
    views = read_logs(list(logs)).tasks
    texts = [
        render_for_rm(v.task.question, c.orchestration)
        for v in views
        for c in v.task.candidates
        if c.orchestration
    ]
    folder = tiny_decoder(tmp_path_factory.mktemp("rm") / "rm", texts)
    (folder / METADATA).write_text(
        json.dumps({"render_version": RM_RENDER_VERSION, "max_length": 256})
    )
    return folder


def test_with_a_reward_model_orchrm_picks_the_best_score(logs, rm_dir, tmp_path):
    from orchrm.scoring.load import load_scorer

    views = pick_all(read_logs(list(logs)).tasks, load_scorer(rm_dir))
    for v in views:
        assert len(v.scores) == len(v.task.candidates)
        assert v.picks["orchrm"] == first_max(v.scores) and "orchrm-weighted" in v.picks
    unparseable = next(v for v in views if v.task.task_id == KNOWN)
    assert unparseable.scores[2] is None
    page = write_view(tmp_path / "p.html", list(logs), rm=rm_dir).read_text()
    assert "RM score" in page and 'data-orchrm-wrong=""' not in page


def test_the_command_writes_the_page_and_refuses_what_it_cannot_read(logs, tmp_path, orchrm_cli):
    out = tmp_path / "page.html"
    done = orchrm_cli("view", str(logs[0]), "--out", str(out), "--samples", "2", "--max-tasks", "2")
    assert done.returncode == 0, done.stderr
    assert "no --rm" in done.stderr and out.is_file()
    parsed = Tags(out.read_text())
    assert len([1 for t, *_ in parsed.tags if t == "section"]) == 2
    assert len([1 for t, *_ in parsed.tags if t == "article"]) == 4
    bad = orchrm_cli("view", str(tmp_path / "nope.jsonl"), "--out", str(out))
    assert bad.returncode == 3 and "nope.jsonl: no such log file" in bad.stderr


# --------------------------------------------------------------------------- Chromium


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    """Render a page's URL: (DOM after its script ran, console messages). Skips when
    Debian's `chromium` is missing or cannot start here."""
    binary = _chromium()
    if not binary:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does)")

    def render(url: str) -> tuple[str, list[str]]:
        done = subprocess.run(
            [
                binary,
                "--headless=new",
                "--disable-gpu",
                "--no-sandbox",
                "--enable-logging=stderr",
                "--v=0",
                "--user-data-dir=" + str(tmp_path_factory.mktemp("chromium")),
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
        return done.stdout, console

    probe = tmp_path_factory.mktemp("probe") / "probe.html"
    probe.write_text("<!doctype html><p id=x>ok</p>")
    try:
        dom, _ = render(probe.as_uri())
    except (OSError, subprocess.TimeoutExpired) as err:
        pytest.skip(f"chromium cannot run here: {err}")
    if 'id="x"' not in dom:
        pytest.skip("chromium cannot run here: it rendered nothing")
    return render


def _status(dom: str) -> dict:
    return next(a for t, a, _ in Tags(dom).tags if a.get("id") == "view-status")


def test_chromium_renders_the_page_without_errors(logs, chromium, tmp_path):
    page = write_view(tmp_path / "view.html", list(logs))
    dom, console = chromium(page.as_uri())
    assert console == []
    status = _status(dom)
    assert status["data-state"] == "ready" and status["data-errors"] == ""
    rendered = Tags(dom)
    assert rendered.of(KNOWN, "g", **{"data-agent": "Solve", "class": "node sink"})
    assert rendered.of(KNOWN, "path", **{"data-from": "Parse", "data-to": "Solve"})
    assert [t for t, *_ in rendered.tags].count("script") == 1 and "alert(" not in "".join(
        rendered.code
    )
    assert int(status["data-nodes"]) == dom.count('class="node')
    # the filters, set from the link
    assert _status(chromium(page.as_uri() + "#domain=math")[0])["data-shown"] == "4"
    assert _status(chromium(page.as_uri() + "#q=" + KNOWN)[0])["data-shown"] == "1"


def test_chromium_reports_a_script_the_policy_refuses(logs, chromium, tmp_path):
    page = build_view([logs[0]]).replace("'data-state', 'ready'", "'data-state', 'tampered'")
    (tmp_path / "tampered.html").write_text(page)
    dom, console = chromium((tmp_path / "tampered.html").as_uri())
    assert _status(dom)["data-state"] == "loading"
    assert any("Content Security Policy" in line for line in console)


def test_chromium_filters_orchrm_picks(logs, rm_dir, chromium, tmp_path):
    page = write_view(tmp_path / "rm.html", list(logs), rm=rm_dir)
    parsed = Tags(page.read_text())
    sections = [a for t, a, _ in parsed.tags if t == "section"]
    for flag in ("wrong", "disagree"):
        want = sum(
            a[f"data-{'orchrm-wrong' if flag == 'wrong' else 'disagree'}"] == "1" for a in sections
        )
        dom, console = chromium(page.as_uri() + f"#{flag}=1")
        assert console == [] and _status(dom)["data-shown"] == str(want)
