"""Mine win/lose pairs of orchestrations from the store, split them, export them.

Kinds (the Orch-RM paper's): `coi` correct-over-incorrect (same task; the chosen one's
execution was right, the rejected one's was not), `sob` specialized-over-base (same task;
chosen from a specialized orchestrator or a checkpoint past a step threshold, rejected
from the base), `soo` specialized-over-other-domain (same task; chosen from the
orchestrator specialized for the task's domain, rejected from one specialized for
another). Mining is SQL inside DuckDB: candidates, de-duplication by reward-model text,
pairing, a per-task cap, the mixing ratio and the task-level split are all queries.

A plan is a task and a reward-model text; its executions are every logged sample of it
(repeated samples, and repeated executions of one sample under other seeds). By default
a CoI side counts only when all its executions agree. With `MineConfig.denoise` CoI is
judged on each plan's success rate over at least `min_runs` executions, and each pair
carries the probability that its chosen plan is truly the better one
(`chosen_beats_rejected`) as its `weight`, which `orchrm train --soft-labels` reads.

Exports are preference datasets (`prompt`, `chosen`, `rejected`, plus `source`,
`task_id`, `domain`, `weight`) where `prompt + chosen` is exactly the reward model's
input text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from orchrm.errors import ConfigError, InputError
from orchrm.jsonl import atomic_file, write_jsonl
from orchrm.orchestration import approx_token_count, rm_completion, rm_prompt, to_harmony
from orchrm.parse import ParseError, from_dict, parse_harmony
from orchrm.store.config import MineConfig
from orchrm.store.db import Store

SOURCE_NAMES = {
    "coi": "correct-over-incorrect",
    "sob": "specialized-over-base",
    "soo": "specialized-over-other-domain",
}
SPLITS = ("train", "validation", "test")
_TASK_DRAW = "(md5_number({task} || ':split:' || {seed}) % 1000000) / 1e6"
"""A task's draw in [0, 1) that decides its split: below the train share, train; below
train + validation, validation; else test. Every pair of a task goes where its task does."""
MINING_VERSION = 2
"""Raised whenever the same logs would give other pairs (ids, draw, weights): cached pairs
stages (`orchrm.experiments.world_models.mine_pairs`) are then mined again."""

_SPLIT_CASE = "CASE WHEN u < ? THEN 'train' WHEN u < ? THEN 'validation' ELSE 'test' END"


@dataclass
class MineSummary:
    """What a mining run found and kept."""

    dataset: str
    available: dict[str, int]
    kept: dict[str, int]
    by_split: dict[str, int]
    tasks_by_split: dict[str, int]
    left_out: list[str]
    denoised: int = 0
    """CoI pairs kept that were judged on success rates (`MineConfig.denoise`)."""
    plans_with_runs: int = 0
    """Plans with `min_runs` executions or more (`denoise`)."""
    plans_few_runs: int = 0
    """Plans executed at least once but fewer than `min_runs` times, left out (`denoise`)."""


def _role_sql(config: MineConfig) -> str:
    parts = []
    if config.specialized:
        parts.append("WHEN orchestrator IN (SELECT * FROM unnest($specialized)) THEN 'specialized'")
    if config.base:
        parts.append("WHEN orchestrator IN (SELECT * FROM unnest($base)) THEN 'base'")
    if config.step_threshold is not None:
        parts.append(
            "WHEN step >= $threshold THEN 'specialized' WHEN step < $threshold THEN 'base'"
        )
    return f"CASE {' '.join(parts)} END" if parts else "NULL"


class NoPairs(InputError):
    """Mining found no pair to keep; the store is left as it was."""


def chosen_beats_rejected(c_right: int, c_wrong: int, r_right: int, r_wrong: int) -> float:
    """P(p_c > p_r) where a plan's success probability p has the posterior Beta(1 +
    right, 1 + wrong) of a uniform prior after its executions, the two independent:
    Evan Miller's closed form for integer parameters, summed exactly in rationals.
    3 of 4 against 1 of 4 is 113/126; 1 of 1 against 0 of 1 is 5/6."""
    return float(_beats(c_right + 1, c_wrong + 1, r_right + 1, r_wrong + 1))


@lru_cache(maxsize=65536)
def _beats(a_c: int, b_c: int, a_r: int, b_r: int) -> Fraction:
    """sum_{i < a_c} B(a_r + i, b_c + b_r) / ((b_c + i) B(1 + i, b_c) B(a_r, b_r)), each
    term the preceding one times their ratio (B(a + 1, b) / B(a, b) = a / (a + b))."""
    n = b_c + b_r
    term = Fraction(1)  # i = 0: B(a_r, n) / B(a_r, b_r)
    for j in range(b_r, n):
        term *= Fraction(j, a_r + j)
    total = term
    for i in range(a_c - 1):
        term *= Fraction(
            (a_r + i) * (b_c + i) * (1 + i + b_c), (a_r + i + n) * (b_c + i + 1) * (1 + i)
        )
        total += term
    return total


def mine(store: Store, config: MineConfig | None = None) -> MineSummary:
    """Mine, cap, mix and split pairs into the store's `pairs` table (one transaction).
    Raises `NoPairs` when no pair is kept, leaving the dataset's pairs as they were."""
    config = config or MineConfig()
    params = {
        "specialized": list(config.specialized),
        "base": list(config.base),
        "threshold": config.step_threshold,
        "domain": config.domain,
        "seed": str(config.seed),
        "cap": config.cap_per_task,
        "allow_invalid": config.allow_invalid_rejected,
        "min_runs": config.min_runs,
        "min_gap": config.min_gap,
    }
    db = store.db
    with store.transaction():
        db.execute(
            "CREATE OR REPLACE TEMP TABLE specialized_for (orchestrator VARCHAR, "
            "for_domain VARCHAR)"
        )
        if config.specialized_for:
            db.executemany(
                "INSERT INTO specialized_for VALUES (?, ?)", list(config.specialized_for.items())
            )
        db.execute(_sql(config), _used(params, _sql(config)))
        _weigh(db)
        available = dict(db.execute("SELECT kind, count(*) FROM capped GROUP BY kind").fetchall())
        weights = {k: w for k, w in config.ratio.items() if w > 0 and available.get(k, 0) > 0}
        left_out = [k for k, w in config.ratio.items() if w > 0 and not available.get(k)]
        total = min(
            (available[k] / (w / sum(weights.values())) for k, w in weights.items()), default=0
        )
        quota = {k: int(total * w / sum(weights.values()) + 1e-9) for k, w in weights.items()}
        db.execute("CREATE OR REPLACE TEMP TABLE quota (kind VARCHAR, n BIGINT)")
        if quota:
            db.executemany("INSERT INTO quota VALUES (?, ?)", list(quota.items()))
        train, validation, _ = config.split
        db.execute("DELETE FROM pairs WHERE dataset = ?", [config.dataset])
        db.execute(
            f"""
            INSERT INTO pairs (dataset, pair_id, task_id, kind, chosen_id, rejected_id,
                               split, weight)
            SELECT ?, pair_id, task_id, kind, chosen_id, rejected_id,
                   {_SPLIT_CASE}, weight
            FROM (
                SELECT c.*, row_number() OVER (PARTITION BY c.kind ORDER BY c.draw) AS n,
                       {_TASK_DRAW.format(task="c.task_id", seed="?")} AS u
                FROM capped c
            ) ranked JOIN quota USING (kind)
            WHERE ranked.n <= quota.n
            """,
            [config.dataset, train, train + validation, str(config.seed)],
        )
        kept = _grouped(db, config.dataset, "kind, count(*)")
        if not kept:  # raised inside the transaction: rolled back
            reason = _no_pairs(available)
            if config.denoise:
                runs = _runs_sql(config)
                judged, few = db.execute(runs, _used(params, runs)).fetchone()
                reason += (
                    f" (denoised: {judged} plans with {config.min_runs}+ runs judged, "
                    f"{few} left out with fewer; see --min-runs and --min-gap)"
                )
            raise NoPairs(reason)
        by_split = _grouped(db, config.dataset, "split, count(*)")
        tasks_by_split = _grouped(db, config.dataset, "split, count(DISTINCT task_id)")
        summary = MineSummary(config.dataset, available, kept, by_split, tasks_by_split, left_out)
        if config.denoise:
            summary.denoised = kept.get("coi", 0)
            runs = _runs_sql(config)
            summary.plans_with_runs, summary.plans_few_runs = db.execute(
                runs, _used(params, runs)
            ).fetchone()
    return summary


def _used(params: dict, query: str) -> dict:
    """The named parameters `query` reads (DuckDB refuses others)."""
    return {k: v for k, v in params.items() if f"${k}" in query}


def _weigh(db) -> None:
    """Give each pair of `capped` its weight: `chosen_beats_rejected` of its sides'
    execution counts for a pair judged on success rates, 1 for any other."""
    counts = db.execute(
        "SELECT DISTINCT c_right, c_wrong, r_right, r_wrong FROM capped WHERE c_right IS NOT NULL"
    ).fetchall()
    db.execute(
        "CREATE OR REPLACE TEMP TABLE confidence (c_right BIGINT, c_wrong BIGINT, "
        "r_right BIGINT, r_wrong BIGINT, weight DOUBLE)"
    )
    if counts:
        rows = [(*c, chosen_beats_rejected(*c)) for c in counts]
        db.executemany("INSERT INTO confidence VALUES (?, ?, ?, ?, ?)", rows)
    db.execute(
        "UPDATE capped SET weight = f.weight FROM confidence f WHERE capped.c_right = "
        "f.c_right AND capped.c_wrong = f.c_wrong AND capped.r_right = f.r_right AND "
        "capped.r_wrong = f.r_wrong"
    )


def _no_pairs(available: dict[str, int]) -> str:
    """Why mining kept no pair, and what to do."""
    if not available:
        return (
            "no pair to mine: the store holds no two orchestrations of one task that make a "
            "pair (one correct and one incorrect, or from --specialized and --base "
            "orchestrators); ingest such logs first"
        )
    found = ", ".join(f"{n} {kind}" for kind, n in sorted(available.items()))
    return (
        f"no pair of the kinds --ratio mixes: the store has {found}; give a --ratio that mixes them"
    )


def split_of_tasks(
    task_ids: list[str], split: tuple[float, float, float], seed: int
) -> dict[str, str]:
    """Task id -> the split (`SPLITS`) that `mine` with this `split` and `seed` puts its
    pairs in: known before any task is executed, so a study can refuse a split that
    leaves no task to validate on before the expensive part."""
    import duckdb

    from orchrm.store.db import CONNECTION_CONFIG

    train, validation, _ = split
    with duckdb.connect(":memory:", config=dict(CONNECTION_CONFIG)) as db:
        rows = db.execute(
            f"SELECT task_id, {_SPLIT_CASE} FROM (SELECT task_id, "
            f"{_TASK_DRAW.format(task='task_id', seed='?')} AS u FROM unnest(?) AS t(task_id))",
            [train, train + validation, str(seed), list(task_ids)],
        ).fetchall()
    return dict(rows)


def _grouped(db, dataset: str, columns: str) -> dict:
    """`{key: count}` of a dataset's pairs: `columns` is the key column and the count."""
    query = f"SELECT {columns} FROM pairs WHERE dataset = ? GROUP BY 1"
    return dict(db.execute(query, [dataset]).fetchall())


def _outcome_sql(config: MineConfig) -> str:
    """The WITH clauses of the candidates and of each plan's outcome over its
    executions, which `_sql` pairs and `_runs_sql` counts."""
    domain_filter = "AND coalesce(o.domain, t.domain) = $domain" if config.domain else ""
    return f"""
    WITH cand AS (
        SELECT o.orch_id, o.task_id, o.orchestrator, o.step, o.valid, o.rm_hash,
               coalesce(nullif(o.domain, ''), t.domain) AS domain,
               e.orch_id IS NOT NULL AS executed, e.correct,
               {_role_sql(config)} AS role
        FROM orchestrations o JOIN tasks t USING (task_id)
        LEFT JOIN executions e USING (orch_id)
        WHERE o.rm_hash IS NOT NULL {domain_filter}
    ),
    -- One representative per reward-model text and task, with its executions counted
    -- (an invalid, unexecuted plan counts as failed).
    outcome AS (
        SELECT task_id, rm_hash,
               coalesce(min(orch_id) FILTER (WHERE executed), min(orch_id)) AS orch_id,
               bool_and(valid) AS valid,
               count(*) FILTER (WHERE executed AND correct) AS n_right,
               count(*) FILTER (WHERE (executed AND NOT coalesce(correct, false))
                                      OR NOT valid) AS n_wrong
        FROM cand GROUP BY task_id, rm_hash
    )"""


def _runs_sql(config: MineConfig) -> str:
    """How many plans have `min_runs` executions or more, and how many fewer (not none)."""
    return f"""{_outcome_sql(config)}
    SELECT count(*) FILTER (WHERE n_right + n_wrong >= $min_runs),
           count(*) FILTER (WHERE n_right + n_wrong BETWEEN 1 AND $min_runs - 1)
    FROM outcome
    """


def _coi_sql(config: MineConfig) -> str:
    """CoI pairs with both sides' execution counts: by default the chosen side's
    executions all right and the rejected side's all wrong (counts NULL: a sure pair);
    with `denoise`, both sides executed `min_runs` times or more and the chosen side's
    success rate above the rejected one's by `min_gap` (up to rounding)."""
    invalid = "AND (w.valid OR $allow_invalid)"
    pairing = "FROM outcome c JOIN outcome w ON c.task_id = w.task_id AND c.rm_hash <> w.rm_hash"
    if not config.denoise:
        return f"""
        SELECT 'coi' AS kind, c.task_id, c.orch_id AS chosen_id, w.orch_id AS rejected_id,
               NULL::BIGINT AS c_right, NULL::BIGINT AS c_wrong, NULL::BIGINT AS r_right,
               NULL::BIGINT AS r_wrong
        {pairing}
        WHERE c.valid AND c.n_right > 0 AND c.n_wrong = 0
              AND w.n_right = 0 AND w.n_wrong > 0 {invalid}"""
    return f"""
        SELECT 'coi' AS kind, c.task_id, c.orch_id AS chosen_id, w.orch_id AS rejected_id,
               c.n_right AS c_right, c.n_wrong AS c_wrong, w.n_right AS r_right,
               w.n_wrong AS r_wrong
        {pairing}
        WHERE c.valid AND c.n_right + c.n_wrong >= $min_runs
              AND w.n_right + w.n_wrong >= $min_runs
              AND c.n_right / (c.n_right + c.n_wrong) - w.n_right / (w.n_right + w.n_wrong)
                  >= $min_gap - 1e-9 {invalid}"""


def _sql(config: MineConfig) -> str:
    """The mining query: candidates -> de-duplicated groups -> pairs of each kind -> cap."""
    invalid = "AND (w.valid OR $allow_invalid)"
    counts = "NULL, NULL, NULL, NULL"
    return f"""
    CREATE OR REPLACE TEMP TABLE capped AS
    {_outcome_sql(config)},
    by_role AS (
        SELECT task_id, rm_hash, role, any_value(domain) AS domain,
               any_value(orchestrator) AS orchestrator, min(orch_id) AS orch_id,
               bool_and(valid) AS valid
        FROM cand WHERE role IS NOT NULL GROUP BY task_id, rm_hash, role
    ),
    by_orchestrator AS (
        SELECT c.task_id, c.rm_hash, min(c.orch_id) AS orch_id, bool_and(c.valid) AS valid,
               any_value(c.domain) AS domain, any_value(s.for_domain) AS for_domain
        FROM cand c JOIN specialized_for s USING (orchestrator)
        GROUP BY c.task_id, c.rm_hash
    ),
    raw_pairs AS (
        {_coi_sql(config)}
        UNION ALL
        SELECT 'sob', c.task_id, c.orch_id, w.orch_id, {counts}
        FROM by_role c JOIN by_role w ON c.task_id = w.task_id AND c.rm_hash <> w.rm_hash
        WHERE c.role = 'specialized' AND w.role = 'base' AND c.valid {invalid}
        UNION ALL
        SELECT 'soo', c.task_id, c.orch_id, w.orch_id, {counts}
        FROM by_orchestrator c JOIN by_orchestrator w
             ON c.task_id = w.task_id AND c.rm_hash <> w.rm_hash
        WHERE c.for_domain = c.domain AND w.for_domain <> c.domain AND c.valid {invalid}
    ),
    -- Each kind keeps its whole population: a pair of texts that is both
    -- correct-over-incorrect and specialized-over-base is a pair of each kind, so
    -- neither kind's draw is biased by the other (dropping it from SoB would leave SoB
    -- the specialized plans that were not better). Within a kind it is one pair.
    drawn AS (
        SELECT kind, task_id, chosen_id, rejected_id, c_right, c_wrong, r_right, r_wrong,
               1.0::DOUBLE AS weight,
               md5(kind || ':' || chosen_id || ':' || rejected_id) AS pair_id,
               md5_number(kind || ':' || chosen_id || ':' || rejected_id || ':' || $seed) AS draw
        FROM raw_pairs
    )
    SELECT * FROM (
        SELECT *, row_number() OVER (PARTITION BY task_id, kind ORDER BY draw) AS k FROM drawn
    ) WHERE k <= $cap
    """


# --------------------------------------------------------------------------- export


def preference_rows(
    store: Store,
    dataset: str = "default",
    split: str | None = None,
    max_tokens: int = 512,
    count_tokens=None,
    domain_in_text: bool = False,
) -> list[dict]:
    """The pairs of a dataset as preference records: `prompt` (the shared question
    part of the reward-model text, with the domain line when `domain_in_text`), `chosen`
    and `rejected` (each side's orchestration part), `source`, `kind`, `task_id`,
    `domain`, `split`, both orchestration ids and `weight` (the probability that the
    chosen side is the better plan: 1 unless mined with `denoise`)."""
    count = count_tokens or approx_token_count
    query = """
        SELECT p.kind, p.task_id, t.domain, p.split, t.question, p.chosen_id, c.parsed,
               p.rejected_id, r.parsed, coalesce(p.weight, 1.0)
        FROM pairs p JOIN tasks t USING (task_id)
        JOIN orchestrations c ON c.orch_id = p.chosen_id
        JOIN orchestrations r ON r.orch_id = p.rejected_id
        WHERE p.dataset = ? AND (? IS NULL OR p.split = ?)
        ORDER BY p.split, p.task_id, p.pair_id
    """
    rows = store.db.execute(query, [dataset, split, split]).fetchall()
    rendered: dict[str, str] = {}
    out = []
    for row in rows:
        kind, task_id, domain, part, question, chosen_id, chosen, rejected_id, rejected, w = row
        prompt = rm_prompt(question, max_tokens, count, domain if domain_in_text else "")
        budget = max_tokens - count(prompt)
        for orch_id, parsed in ((chosen_id, chosen), (rejected_id, rejected)):
            if (orch_id, budget) not in rendered:
                rendered[(orch_id, budget)] = rm_completion(
                    from_dict(json.loads(parsed)), budget, count
                )
        out.append(
            {
                "prompt": prompt,
                "chosen": rendered[(chosen_id, budget)],
                "rejected": rendered[(rejected_id, budget)],
                "source": SOURCE_NAMES[kind],
                "kind": kind,
                "task_id": task_id,
                "domain": domain or "",
                "split": part,
                "chosen_id": chosen_id,
                "rejected_id": rejected_id,
                "weight": w,
            }
        )
    return out


def export(
    store: Store,
    out_dir: str | Path,
    dataset: str = "default",
    fmt: str = "jsonl",
    max_tokens: int = 512,
    count_tokens=None,
    domain_in_text: bool = False,
) -> dict[str, Path]:
    """Write each split of a dataset to OUT_DIR/<split>.<jsonl|parquet>; returns the
    paths written. Parquet and JSONL load with `datasets.load_dataset` as they are.
    `count_tokens` measures the `max_tokens` budget (default: `approx_token_count`; pass
    the reward model's tokenizer to cut texts exactly where the model would). With
    `domain_in_text`, each text starts with its task's domain line, for one model of
    every domain."""
    if fmt not in ("jsonl", "parquet"):
        raise ConfigError(f"format must be jsonl or parquet, got {fmt!r}")
    rows = preference_rows(store, dataset, None, max_tokens, count_tokens, domain_in_text)
    if not rows:
        raise InputError(f"dataset {dataset!r} has no pairs: run `orchrm pairs mine` first")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for part in SPLITS:
        part_rows = [r for r in rows if r["split"] == part]
        if not part_rows:
            continue
        path = out_dir / f"{part}.{fmt}"
        if fmt == "jsonl":
            write_jsonl(part_rows, path)
        else:
            with atomic_file(path, "wb") as f:
                pq.write_table(pa.Table.from_pylist(part_rows), f)
        written[part] = path
    return written


def export_orchrm_datasets(store: Store, path: str | Path, dataset: str = "default") -> int:
    """Write a dataset in the OrchRM-datasets format (`input`, `chosen`, `rejected`,
    `source`), with the raw orchestrator outputs and the question as `input`."""
    rows = store.db.execute(
        """
        SELECT t.question, c.raw, c.parsed, r.raw, r.parsed, p.kind
        FROM pairs p JOIN tasks t USING (task_id)
        JOIN orchestrations c ON c.orch_id = p.chosen_id
        JOIN orchestrations r ON r.orch_id = p.rejected_id
        WHERE p.dataset = ? ORDER BY p.task_id, p.pair_id
        """,
        [dataset],
    ).fetchall()
    write_jsonl(
        (
            {
                "input": q,
                "chosen": _harmony(c, cp),
                "rejected": _harmony(r, rp),
                "source": SOURCE_NAMES[k],
            }
            for q, c, cp, r, rp, k in rows
        ),
        path,
    )
    return len(rows)


def _harmony(raw: str, parsed: str) -> str:
    """The orchestrator's own text when it is harmony; else the parsed plan rendered as
    harmony (logs may hold JSON plans), so the export reads back as the same pairs."""
    try:
        parse_harmony(raw)
        return raw
    except ParseError:
        try:
            return to_harmony(from_dict(json.loads(parsed)))
        except ValueError:
            return raw
