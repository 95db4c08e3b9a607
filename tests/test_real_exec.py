"""Seeded executions and the real-execution benchmark's pipeline
(`orchrm.experiments.real_exec.run`): call seeds, the execution cache, expected accuracy from
re-executions, two draws, and the same seed repeating on llama.cpp.

The pipeline runs at a tiny size against the loopback stand-in of an OpenAI-compatible
server (tests/loopback_llm.py), whose replies are a pure function of each request's
seed and prompt, so it checks what the code does with the seeds, the cache and the
re-executions; one test runs seeded plans twice on llama.cpp itself (SmolLM2-135M)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import statistics
from collections import Counter
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace

import pytest

from orchrm.errors import ConfigError
from orchrm.experiments.real_exec.cache import CACHE_SCHEMA, ExecutionCache, bind_setup, write_plans
from orchrm.experiments.real_exec.evaluate import (
    Versus,
    agreement,
    plan_agreement,
    run_seed,
    with_outcomes,
)
from orchrm.experiments.real_exec.run import run
from orchrm.experiments.real_exec.settings import (
    MIX,
    NO_PROMPT_CACHE,
    RealExecSettings,
    Sizes,
    execution_setup,
)
from orchrm.experiments.real_exec.tasks import draw_tasks, training_plans
from orchrm.jsonl import append_jsonl, read_values
from orchrm.runtime.backend import DEFAULT_SAMPLING, CallInfo, Completion, Sampling, call_seed
from orchrm.runtime.config import RunConfig
from orchrm.runtime.executor import RunItem, execute_many
from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
from orchrm.scoring.local import OrchRM
from orchrm.selection.selectors import majority_selector
from orchrm.tasks.benchmarks.generated import make_tasks
from orchrm.tasks.grading import grade
from orchrm.world.templates import SINGLE, TemplateOrchestrator, single_plan
from tests.conftest import THREADS
from tests.loopback_llm import LoopbackLLM
from tests.samples import candidate_set, plan, tiny_decoder

SMALL = RunConfig(sc_samples=3, debate_rounds=2, reflexion_rounds=2, search_iterations=2)


class SeedRecorder:
    """A backend that answers every call at once and records the seed each was sent."""

    def __init__(self):
        self.calls: list[tuple[tuple, int | None]] = []

    async def complete(self, messages, call: CallInfo, sampling: Sampling = DEFAULT_SAMPLING):
        place = (call.task_id, call.sample, call.agent_id, call.step, call.debate_role, call.round)
        self.calls.append((place, sampling.seed))
        text = "SEARCH: apples" if call.step == "search" else "Answer: 4"
        return Completion(text, 3, 2)


def run_every_type(seed: int | None, concurrency: int) -> dict[tuple, int | None]:
    backend = SeedRecorder()
    plans = [single_plan(structure) for structure in SINGLE.values()]
    if "WebSearchAgent" not in SINGLE:
        plans.append(plan("WebSearchAgent"))
    items = [RunItem(p, "What is 2 + 2?", "task", s, seed) for s, p in enumerate(plans)]
    config = replace(SMALL, concurrency=concurrency)
    asyncio.run(execute_many(items, backend, config, progress=False))
    seeds = dict(backend.calls)
    assert len(seeds) == len(backend.calls), "two calls at one place"
    return seeds


def test_every_call_gets_its_own_seed_and_the_same_one_again_with_the_same_execution_seed():
    first = run_every_type(7, concurrency=8)
    assert len(first) > 15 and all(isinstance(s, int) for s in first.values())
    assert len(set(first.values())) == len(first)  # one seed a call, none shared
    assert run_every_type(7, concurrency=1) == first  # not the order calls are made in
    other = run_every_type(8, concurrency=8)
    assert other.keys() == first.keys()
    assert not set(other.values()) & set(first.values())
    assert set(run_every_type(None, concurrency=8).values()) == {None}
    place = next(iter(first))
    info = CallInfo(
        task_id=place[0], sample=place[1], agent_id=place[2], step=place[3], round=place[5]
    )
    assert call_seed(7, info) == first[place]
    assert call_seed(7, replace(info, sample=1)) != call_seed(7, info)


def test_the_openai_backend_sends_the_seed_only_when_there_is_one():
    async def go(server):
        async with OpenAIBackend(OpenAIConfig(base_url=server.base_url)) as backend:
            await backend.complete(
                [{"role": "user", "content": "hi"}], CallInfo(), Sampling(seed=5)
            )
            await backend.complete([{"role": "user", "content": "hi"}], CallInfo())

    with LoopbackLLM() as server:
        asyncio.run(go(server))
    assert server.requests[0]["seed"] == 5
    assert "seed" not in server.requests[1]


def test_appends_survive_a_torn_line_and_the_cache_reads_back_what_it_kept(tmp_path):
    path = tmp_path / "c.jsonl"
    append_jsonl([{"a": 1}], path)
    with open(path, "ab") as f:
        f.write(b'{"a": 2, "torn')  # a crash mid-append
    append_jsonl([{"a": 3}, {"a": 4}], path)
    values = [v for _, v in read_values(path)]
    assert values[0] == {"a": 1} and values[2:] == [{"a": 3}, {"a": 4}]
    assert getattr(values[1], "reason", None) == "invalid_json"

    tasks = make_tasks(MIX[:1], 2, 0, "cache")
    plans = write_plans(TemplateOrchestrator("base", False), tasks, 2)
    cache = ExecutionCache(tmp_path / "executions.jsonl")
    wanted = [p.at(run_seed(3, k)) for p in plans for k in range(2)]
    missing = cache.missing(wanted + wanted[:2])  # the same key twice runs once
    assert len(missing) == len(wanted) and cache.hits == 0
    backend = SeedRecorder()
    asyncio.run(cache.execute(backend, missing, SMALL, progress=False))
    with open(cache.path, "ab") as f:
        f.write(b'{"schema": "' + CACHE_SCHEMA.encode())  # torn
    again = ExecutionCache(cache.path)
    assert again.torn == 1 and not again.missing(wanted) and again.hits == len(wanted)
    assert again.result(wanted[0]).answer == "4"
    assert again.result(wanted[0]).calls == cache.result(wanted[0]).calls


def test_expected_accuracy_inputs_and_the_agreement_rule():
    task = candidate_set(["1", "2"], [True, False])
    runs = {("t", 0): [("1", True), ("9", False), ("1", True)], ("t", 1): [("2", False)] * 3}
    (done,) = with_outcomes([task], runs)
    assert [c.p_success for c in done.candidates] == [pytest.approx(2 / 3), 0.0]
    assert done.candidates[0].reruns == tuple(runs[("t", 0)])

    def draw(lo, hi):
        return Versus(0, (lo + hi) / 2, (lo, hi), 0.0, (lo, hi))

    assert agreement([draw(0.01, 0.1), draw(0.02, 0.2)])[0]
    assert agreement([draw(-0.1, 0.1), draw(-0.05, 0.02)])[0]
    assert not agreement([draw(0.01, 0.1), draw(-0.05, 0.02)])[0]
    assert not agreement([draw(0.01, 0.1), draw(-0.1, -0.01)])[0]
    assert draw(-0.05, 0.07).width == pytest.approx(0.12)


# --------------------------------------------------------------------------- pipeline


def stand_in_reply(truths: dict[str, str]):
    """A reply that depends only on the request's seed and prompt: the task's answer two
    times in three, else a wrong one."""

    def reply(request: dict) -> str:
        text = " ".join(m.get("content") or "" for m in request["messages"])
        truth = next((a for q, a in truths.items() if q in text), "0")
        digest = hashlib.sha256(f"{request.get('seed')}|{text}".encode()).digest()
        right = digest[0] % 3 != 0
        return f"Working.\nAnswer: {truth if right else truth + '1'}"

    return reply


SIZES = Sizes(train_tasks=8, test_tasks=4, samples=3, steps=2, reruns=3)


def truths(sizes: Sizes, seed: int = 0) -> dict[str, str]:
    """Question -> answer of the tasks a run of `sizes` makes."""
    split = draw_tasks(RealExecSettings(sizes=sizes, seed=seed), say=lambda line: None)
    return {t.task.question: t.task.answer for part in split.parts.values() for t in part}


@pytest.fixture(scope="module")
def backbone(tmp_path_factory) -> str:
    """A tiny random decoder (tests/samples.py) as the reward model's backbone: the
    pipeline's stages, caches and reports are under test here, not MiniLM's training,
    which tests/test_rm.py covers."""
    questions = [q for seed in (0, 3, 5) for q in truths(SIZES, seed)]
    return str(tiny_decoder(tmp_path_factory.mktemp("backbone") / "tiny", questions))


def test_the_pipeline_reuses_its_cache_resumes_and_reports_expected_accuracy(tmp_path, backbone):
    settings = RealExecSettings(
        out=str(tmp_path), sizes=SIZES, execution_seeds=(4, 9), backbone=backbone
    )
    split = draw_tasks(settings, say=lambda line: None)
    tasks = split["train"] + split["test"]
    server = LoopbackLLM(reply=stand_in_reply({t.task.question: t.task.answer for t in tasks}))
    started = []

    @contextmanager
    def backend(s):
        started.append(s)
        yield OpenAIBackend(OpenAIConfig(base_url=server.base_url))

    lines: list[str] = []
    path = tmp_path / "executions.jsonl"
    with server:
        first = run(settings, say=lines.append, backend=backend)
        calls = len(server.requests)
        assert calls and all(isinstance(r.get("seed"), int) for r in server.requests)
        again = run(settings, say=lines.append, backend=backend)
        assert len(server.requests) == calls and len(started) == 1  # nothing ran again
        assert any("no server started" in line for line in lines)
        assert all(c["to run"] == 0 for c in again["executions"].values())
        assert again["draws"] == first["draws"] and again["verdicts"] == first["verdicts"]
        # interrupted: two runs lost, one torn mid-append; only these three run again
        kept = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(kept[:-3]) + kept[-3][:40])
        resumed = run(settings, say=lines.append, backend=backend)
    assert sum(c["to run"] for c in resumed["executions"].values()) == 3
    assert len(ExecutionCache(path).done) == len(kept) and len(started) == 2
    assert resumed["draws"] == first["draws"]  # the same seeds gave the same answers
    k, n = SIZES.reruns, SIZES.samples
    assert first["executions"]["test seed 9"]["executions"] == SIZES.test_tasks * n * k
    assert isinstance(first["agree"], bool) and "seed 4" in first["agreement"]
    assert {"serve start", "execute train", "execute test seed 4", "evaluate seed 9"} <= set(
        first["seconds"]
    )

    cache = [json.loads(line) for line in kept]
    runs = {(c["task_id"], c["sample"], c["seed"]): c["execution"]["answer"] for c in cache}
    model = OrchRM.load(tmp_path / "rm" / "model", dtype="fp32")
    truth = {t.task.id: t.task.answer for t in tasks}
    for seed in (4, 9):
        records = [
            json.loads(line)
            for line in (tmp_path / "logs" / f"test.seed{seed}.jsonl").read_text().splitlines()
        ]
        assert {r["execution_seed"] for r in records} == {run_seed(seed, 0)}
        by_task: dict[str, list[dict]] = {}
        for r in records:
            by_task.setdefault(r["task_id"], []).append(r)
        logp, vote, rm = [], [], []
        for task_id, rs in by_task.items():
            rs.sort(key=lambda r: r["sample_index"])
            answers = [
                [runs.get((task_id, r["sample_index"], run_seed(seed, i))) for r in rs]
                for i in range(k)
            ]
            domain = rs[0]["domain"]
            right = [[bool(grade(a, truth[task_id], domain)) for a in row] for row in answers]
            best = max(range(n), key=lambda s: (rs[s]["orchestrator_logprob"], -s))
            logp.append(statistics.fmean(row[best] for row in right))
            scores = [x.score for x in model.score([(r["question"], r["raw"]) for r in rs])]
            chosen = max(range(n), key=lambda s: (scores[s], -s))
            rm.append(statistics.fmean(row[chosen] for row in right))
            votes = [
                row[majority_selector(replace(candidate_set(a, row), domain=domain)).index]
                for a, row in zip(answers, right, strict=True)
            ]
            vote.append(statistics.fmean(votes))
        report = json.loads((tmp_path / f"seed-{seed}" / "report.json").read_text())
        at_n = {r["selector"]: r for r in report["evaluations"][0]["results"] if r["n"] == n}
        assert at_n["logp"]["expected_accuracy"] == pytest.approx(statistics.fmean(logp))
        assert at_n["majority"]["expected_accuracy"] == pytest.approx(statistics.fmean(vote))
        assert at_n["orchrm"]["expected_accuracy"] == pytest.approx(statistics.fmean(rm))
        gap = at_n["orchrm"]["expected_vs_baseline"]
        assert gap == pytest.approx(statistics.fmean(rm) - statistics.fmean(vote))
        lo, hi = at_n["orchrm"]["expected_vs_baseline_ci"]
        assert lo <= gap <= hi and hi - lo < 2
        # by task kind: the kinds' orchrm rows, weighted by their tasks, give the whole
        table = (tmp_path / f"seed-{seed}" / "by_kind.txt").read_text().splitlines()
        rows = [line.split() for line in table[2:] if not line.startswith("retrieval")]
        assert all(r[-3].startswith("(") and r[-1].endswith(")") for r in rows)
        assert {r[0] for r in rows} == {t.kind for t in tasks if t.task.id.startswith("test")}
        weighted = sum(int(r[1]) * float(r[2]) for r in rows) / sum(int(r[1]) for r in rows)
        assert weighted == pytest.approx(100 * at_n["orchrm"]["expected_accuracy"], abs=0.06)
    train = (tmp_path / "logs" / "train.jsonl").read_text().splitlines()
    assert {json.loads(line)["execution_seed"] for line in train} == {run_seed(4, 0)}
    assert Counter(json.loads(line)["orchestrator"] for line in train) == Counter(
        specialized=SIZES.train_tasks * n, base=SIZES.train_tasks * n
    )
    # the training plans' success per orchestrator and task kind, as the table says it
    records = [json.loads(line) for line in train]
    for who in ("base", "specialized"):
        for kind in {r["kind"] for r in records}:
            right = [r["correct"] for r in records if (r["orchestrator"], r["kind"]) == (who, kind)]
            shown = first["train_success_by_structure"][f"orchestrator {who}"][kind]
            assert shown == pytest.approx(100 * statistics.fmean(right))


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_variant_shares_the_cache_and_trains_an_ensemble_on_denoised_pairs(tmp_path, backbone):
    sizes = Sizes(train_tasks=8, test_tasks=4, samples=3, steps=2, reruns=2)
    shared = tmp_path / "executions.jsonl"
    base = RealExecSettings(
        out=str(tmp_path / "one"), sizes=sizes, execution_seeds=(4,), backbone=backbone
    )
    base = replace(base, cache=str(shared))
    server = LoopbackLLM(reply=stand_in_reply(truths(sizes)))
    started = []

    @contextmanager
    def backend(s):
        started.append(s)
        yield OpenAIBackend(OpenAIConfig(base_url=server.base_url))

    variant = replace(base, out=str(tmp_path / "variant"), train_runs=2, members=2)
    with server:
        one = run(base, say=lambda line: None, backend=backend)
        calls = len(server.requests)
        both = run(variant, say=lambda line: None, backend=backend)
    # only the training plans' second runs were missing from the shared cache
    assert both["executions"]["train"]["to run"] == one["executions"]["train"]["executions"]
    assert both["executions"]["test seed 4"]["to run"] == 0 and len(started) == 2
    assert len(server.requests) > calls and not (tmp_path / "variant" / "executions.jsonl").exists()
    train = _lines(tmp_path / "variant" / "logs" / "train.jsonl")
    assert Counter(r["execution_seed"] for r in train) == {
        run_seed(4, 0): len(train) // 2,
        run_seed(4, 1): len(train) // 2,
    }
    pairs = _lines(tmp_path / "variant" / "pairs" / "train.jsonl")
    assert pairs and all(0.5 < p["weight"] < 1 for p in pairs if p["kind"] == "coi")
    meta = json.loads((tmp_path / "variant" / "rm" / "model" / "orchrm.json").read_text())
    assert meta["ensemble"]["members"] == 2
    assert (tmp_path / "variant" / "rm" / "model" / "members" / "1" / "config.json").is_file()
    config = json.loads((tmp_path / "variant" / "rm" / "stage.json").read_text())
    assert '"soft_labels": true' in json.dumps(config)
    with pytest.raises(ConfigError, match="train_runs"):
        replace(base, train_runs=0)
    with pytest.raises(ConfigError, match="train runs 1000: give 1 to 999"):
        run(replace(base, train_runs=1000), say=lambda line: None, backend=backend)


def test_plans_that_differ_for_real_correlate_across_draws(monkeypatch):
    import orchrm.experiments.real_exec.evaluate as draws

    tasks = make_tasks(MIX, 2 * len(MIX), 0, "t")
    plans = [SimpleNamespace(task=t, sample=s) for t in tasks for s in range(4)]

    # arithmetic: sample 0 is right in every run of both draws (a real difference);
    # retrieval: draw 0 favours sample 0, draw 1 sample 1 (luck that does not repeat)
    def right(p, seed, cache):
        first_draw = seed < 1000
        favoured = 0 if p.task.documents == () or first_draw else 1
        return None, p.sample == favoured

    monkeypatch.setattr(draws, "outcome", right)
    text, r = plan_agreement(plans, (0, 1), 2, cache=None)
    assert r["add"] == pytest.approx(1.0) and r["mul"] == pytest.approx(1.0)
    assert r["capital"] == pytest.approx(-1 / 3) and r["founded"] == pytest.approx(-1 / 3)
    assert -1 / 3 < r["all"] < 1 and text.splitlines()[-1].startswith("all")


def test_the_held_out_oracle_picks_on_one_draw_and_scores_on_the_other(monkeypatch):
    import orchrm.experiments.real_exec.evaluate as draws

    tasks = make_tasks(MIX, 2 * len(MIX), 0, "t")
    plans = [SimpleNamespace(task=t, sample=s) for t in tasks for s in range(4)]

    # arithmetic: sample 0 is right in every run of both draws, sample 1 in draw 0's
    # first run only; retrieval: each draw favours another sample (luck that does not repeat)
    def right(p, seed, cache):
        first_draw, k = seed < 1000, seed % 1000
        if p.task.documents == ():
            return None, p.sample == 0 or (p.sample == 1 and first_draw and k == 0)
        return None, p.sample == (0 if first_draw else 1)

    monkeypatch.setattr(draws, "outcome", right)
    text, numbers = draws.cross_draw_oracle(plans, (0, 1), 2, cache=None)
    arithmetic = sum(1 for t in tasks if t.documents == ()) / len(tasks)
    assert numbers["0->1"]["accuracy"] == pytest.approx(arithmetic)  # retrieval picks miss
    assert numbers["1->0"]["accuracy"] == pytest.approx(arithmetic)
    assert numbers["0->1"]["same_draw"] == numbers["1->0"]["same_draw"] == 1.0
    lo, hi = numbers["0->1"]["ci"]
    assert lo < arithmetic < hi
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[2:] if line[0] != "p"}
    assert rows["add"][1:] == ["100.0", "100.0", "100.0", "100.0"]
    assert rows["capital"][1:] == ["0.0", "100.0", "0.0", "100.0"]


def test_a_cache_answers_only_for_the_setup_it_was_made_with(tmp_path):
    cache = tmp_path / "out" / "executions.jsonl"
    setup = execution_setup(RealExecSettings())
    written = bind_setup(cache, setup)
    assert bind_setup(cache, dict(setup)) == written  # the same setup: accepted
    for changed in ({"max_tokens": 64}, {"corpus_sha256": "0" * 64}):
        with pytest.raises(ConfigError, match=rf"{next(iter(changed))} .* there, .* here"):
            bind_setup(cache, setup | changed)
    assert execution_setup(RealExecSettings(max_tokens=64))["max_tokens"] == 64
    written.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not a setup file"):
        bind_setup(cache, setup)


def test_a_run_of_another_question_under_the_same_task_id_is_executed_not_served(tmp_path):
    (task,) = make_tasks(MIX[:1], 1, 0, "cache")
    other = replace(task, task=replace(task.task, question="What is 7 + 6?", answer="13"))
    (written,) = write_plans(TemplateOrchestrator("base", False), [task], 1)
    cache = ExecutionCache(tmp_path / "executions.jsonl")
    asyncio.run(cache.execute(SeedRecorder(), [written.at(5)], SMALL, progress=False))
    moved = replace(written, task=other)  # the same id, plan text, seed and sample
    assert moved.at(5).key[0] == written.at(5).key[0] and moved.at(5).raw == written.at(5).raw
    reopened = ExecutionCache(cache.path)
    assert reopened.missing([moved.at(5)]) == [moved.at(5)] and reopened.result(moved.at(5)) is None
    assert reopened.missing([written.at(5)]) == [] and reopened.hits == 1
    # an entry of the older schema, whose key had no question, is never served
    with open(cache.path, "a") as f:
        f.write(json.dumps({"schema": "orchrm.exec-cache/1", "task_id": "x"}) + "\n")
    assert ExecutionCache(cache.path).stale == 1


def _asked(settings: RealExecSettings) -> set:
    """The keys of every runnable execution a run of `settings` asks for."""
    split = draw_tasks(settings, say=lambda line: None)
    special = TemplateOrchestrator("specialized", specialized=True, seed=settings.seed)
    train = [
        p.at(run_seed(settings.execution_seeds[0], 0))
        for p in training_plans(settings, split["train"])
    ]
    test = [
        p.at(run_seed(e, k))
        for p in write_plans(special, split["test"], settings.sizes.samples)
        for e in settings.execution_seeds
        for k in range(settings.sizes.reruns)
    ]
    return {e.key for e in train + test if e.runnable}


def test_other_task_seeds_into_one_out_execute_only_what_was_not_asked(tmp_path, backbone):
    """And a seed whose training tasks leave none to validate on is refused first."""
    sizes = replace(SIZES, reruns=1)
    first, second, bare = (
        RealExecSettings(
            out=str(tmp_path), sizes=sizes, execution_seeds=(0,), seed=seed, backbone=backbone
        )
        for seed in (3, 5, 11)
    )
    server = LoopbackLLM(reply=stand_in_reply(truths(sizes, 3) | truths(sizes, 5)))
    started = []

    @contextmanager
    def backend(s):
        started.append(s.seed)
        yield OpenAIBackend(OpenAIConfig(base_url=server.base_url))

    with server:
        done = run(first, say=lambda line: None, backend=backend)
        again = run(second, say=lambda line: None, backend=backend)
        asked = len(server.requests)
        with pytest.raises(
            ConfigError, match=r"seed 11: none of the 8 training tasks .* validation"
        ):
            run(bare, say=lambda line: None, backend=backend)
    assert started == [3, 5] and len(server.requests) == asked  # refused before any call
    new = _asked(second) - _asked(first)
    assert sum(c["to run"] for c in again["executions"].values()) == len(new) > 0
    assert sum(c["cached"] for c in again["executions"].values()) == len(_asked(second) - new)
    for result in (done, again):
        assert result["validation_accuracy"] is not None and len(result["verdicts"]) == 1
    # every kept run was made for the question its task id had in the run that asked it
    asked_questions = {(k[0], k[1]) for k in _asked(first) | _asked(second)}
    entries = [
        json.loads(line) for line in (tmp_path / "executions.jsonl").read_text().splitlines()
    ]
    assert {(e["task_id"], e["question"]) for e in entries} <= asked_questions


def test_settings_no_run_can_have_are_refused(tmp_path):
    for bad in ((), (1, 1), (-1,)):
        with pytest.raises(ConfigError, match="execution seeds"):
            run(RealExecSettings(out=str(tmp_path), sizes=SIZES, execution_seeds=bad))
    with pytest.raises(ConfigError, match="reruns"):
        run(RealExecSettings(out=str(tmp_path), sizes=replace(SIZES, reruns=0)))


# --------------------------------------------------------------------------- llama.cpp


def test_the_same_execution_seed_repeats_every_answer_on_llama_cpp_with_one_slot():
    try:
        import xllamacpp  # noqa: F401

        from orchrm.runtime.local_llm import LocalLLM, LocalLLMConfig, bundled_gguf

        bundled_gguf()
    except (ImportError, OSError, ConfigError) as err:
        pytest.skip(f"llama.cpp or SmolLM2 cannot run here: {err}")
    tasks = make_tasks(MIX[:1], 1, 0, "seeded")
    items = [
        RunItem(single_plan(structure), t.task.question, t.task.id, s)
        for t in tasks
        for s, structure in enumerate(SINGLE[x] for x in ("CoTAgent", "SCAgent"))
    ]
    # every run at once: the one slot serves them in whatever order they arrive
    config = RunConfig(temperature=0.9, max_tokens=24, sc_samples=2, max_retries=0)

    async def execute(llm, seed):
        where = {"base_url": llm.base_url, "model": llm.model, "timeout_s": 300}
        backend = OpenAIBackend(OpenAIConfig(**where, extra_body=NO_PROMPT_CACHE))
        async with backend:
            seeded = [replace(item, seed=seed) for item in items]
            results = await execute_many(seeded, backend, config, progress=False)
        # each call's text; the trace lists concurrent calls (SC's) as they finish
        return [(r.answer, sorted(c.completion for c in r.calls)) for r in results]

    with LocalLLM(LocalLLMConfig(ctx_size=1024, slots=1, threads=THREADS)) as llm:
        first = asyncio.run(execute(llm, 11))
        again = asyncio.run(execute(llm, 11))
        other = asyncio.run(execute(llm, 12))
    assert all(calls for _, calls in first) and again == first
    assert other != first
