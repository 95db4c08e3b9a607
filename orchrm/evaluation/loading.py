"""The tasks an evaluation reads: each task's candidates (`CandidateSet`, in sample
order) from `orchrm.run/1` logs (`tasks_from_logs`) or from a store (`tasks_from_store`),
one orchestrator's samples, the first N of each task."""

from __future__ import annotations

import json

from orchrm.jsonl import read_jsonl
from orchrm.parse import from_dict
from orchrm.selection.selectors import Candidate, CandidateSet


def tasks_from_logs(
    paths: list[str],
    orchestrator: str | None = None,
    n: int | None = None,
    domain: str | None = None,
) -> list[CandidateSet]:
    """Tasks with their candidates (in sample order) from `orchrm.run/1` logs: one
    orchestrator's samples (all when None), the first `n` of each task."""
    groups: dict[str, list[dict]] = {}
    for path in paths:
        for _, r in read_jsonl(path):
            if not isinstance(r, dict) or "task_id" not in r:
                continue
            if orchestrator and r.get("orchestrator") != orchestrator:
                continue
            if domain and r.get("domain") != domain:
                continue
            groups.setdefault(r["task_id"], []).append(r)
    tasks = []
    for task_id, records in groups.items():
        records.sort(key=lambda r: r.get("sample_index") or 0)
        records = records[:n] if n else records
        tasks.append(
            CandidateSet(
                task_id,
                records[0]["question"],
                tuple(map(_candidate, records)),
                records[0].get("domain", ""),
            )
        )
    return tasks


def tasks_from_store(
    store,
    orchestrator: str | None = None,
    n: int | None = None,
    domain: str | None = None,
    held_out_of: str | None = None,
) -> list[CandidateSet]:
    """Tasks with their candidates (in sample order) from a store: one orchestrator's
    samples (all when None), the first `n` of each task, one domain (all when None).

    `held_out_of`: a mined pair dataset; tasks with a pair in its `train` or `validation`
    split are left out, so a reward model trained on that dataset is evaluated only on
    tasks it never saw. Stores keep no call transcripts: a trajectory-level judge reads
    each candidate's answer only.
    """
    from orchrm.store.db import StoreError

    if held_out_of is not None:
        known = store.db.execute(
            "SELECT count(*) FROM pairs WHERE dataset = ?", [held_out_of]
        ).fetchone()[0]
        if not known:
            raise StoreError(f"no pair dataset {held_out_of!r} in the store (mine it first)")
    rows = store.db.execute(
        """
        SELECT o.task_id, t.question, coalesce(o.domain, t.domain, ''), o.sample_index,
               o.parsed, o.valid, e.answer, e.correct,
               coalesce(e.prompt_tokens, 0) + coalesce(e.completion_tokens, 0),
               o.logprob, e.p_success, o.orch_id
        FROM orchestrations o
        JOIN tasks t USING (task_id)
        LEFT JOIN executions e USING (orch_id)
        WHERE (? IS NULL OR o.orchestrator = ?)
          AND (? IS NULL OR coalesce(o.domain, t.domain) = ?)
          AND (? IS NULL OR o.task_id NOT IN (
                SELECT task_id FROM pairs
                WHERE dataset = ? AND split IN ('train', 'validation')))
        ORDER BY o.task_id, o.sample_index NULLS LAST, o.orch_id
        """,
        [orchestrator, orchestrator, domain, domain, held_out_of, held_out_of],
    ).fetchall()
    groups: dict[str, list[tuple]] = {}
    for row in rows:
        groups.setdefault(row[0], []).append(row)
    tasks = []
    for task_id, members in groups.items():
        members = members[:n] if n else members
        candidates = tuple(
            Candidate(
                orchestration=from_dict(json.loads(parsed)) if parsed else None,
                answer=answer,
                correct=bool(correct),
                execution_tokens=int(tokens),
                logprob=logprob,
                p_success=p_success,
                orch_id=orch_id,
                trajectory=f"final answer: {answer}" if answer is not None else "",
            )
            for _, _, _, _, parsed, _, answer, correct, tokens, logprob, p_success, orch_id in (
                members
            )
        )
        tasks.append(CandidateSet(task_id, members[0][1], candidates, members[0][2]))
    return tasks


def _candidate(r: dict) -> Candidate:
    execution = r.get("execution") or {}
    trajectory = "\n".join(
        f"[{c['agent_id']}/{c['step']}] {c['completion']}" for c in execution.get("calls", [])
    )
    return Candidate(
        orchestration=from_dict(r["orchestration"]) if r.get("orchestration") else None,
        answer=r.get("answer"),
        correct=bool(r.get("correct")),
        execution_tokens=int(execution.get("total_tokens") or 0),
        logprob=r.get("orchestrator_logprob"),
        p_success=(r.get("world") or {}).get("p_success"),
        trajectory=trajectory,
        orchestrator_tokens=_orchestrator_tokens(r),
    )


def _orchestrator_tokens(r: dict) -> int:
    """What the orchestrator spent on the sample: `tokens.orchestrator`, else its prompt
    + completion in `orchestrator_tokens` (0 when the log has neither)."""
    total = (r.get("tokens") or {}).get("orchestrator")
    if total is None:
        total = sum(v for v in (r.get("orchestrator_tokens") or {}).values() if v)
    return int(total or 0)
