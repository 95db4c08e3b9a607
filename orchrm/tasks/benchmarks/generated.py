"""Exact-answer tasks generated from a seed (`TASK_KINDS`), each kind at three levels of
difficulty (`LEVELS`):

- arithmetic (`ARITHMETIC_KINDS`): sums, differences, products, "has x, gets y more" word
  problems, two-step sums, comparisons and letter counts, whose answer is a whole number;
- retrieval (`RETRIEVAL_KINDS`): facts about invented places (`capital`: a republic's
  capital and largest port; `founded`: a town's founding and charter years), which no
  model knows: each task carries the one-fact passages its answer needs and passages
  about other places (`GeneratedTask.documents`), which `corpus` pools into the BM25
  corpus the web-search sub-agent searches.

Every task's domain is `generated`; `grade` (`orchrm.tasks.grading.grade` for that domain)
grades a number with the math checker and a place name by normalized match
(`name_correct`).

`split_tasks` draws the parts of a study (training and held-out tasks) from one pool
without replacement, `make_tasks` one part alone; `save_tasks` writes them as a task file
that `orchrm run --tasks` reads as it is (`id`, `question`, `answer`, `domain`) and that
`load` reads back with each task's kind, level and passages; `save_corpus` writes their
pooled passages as a corpus file for `orchrm run --corpus`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchrm.errors import ConfigError, InputError
from orchrm.jsonl import write_jsonl
from orchrm.runtime.retrieval import BM25Retriever, Document
from orchrm.tasks.answers import as_number, is_correct, math_correct, normalize_text
from orchrm.tasks.benchmarks.base import check_unique_ids, existing, jsonl_objects, required
from orchrm.tasks.task import Task, question_key

DOMAIN = "generated"
"""Every task's domain: `orchrm.tasks.grading.grade` grades it with `grade`."""

NAMES = ("Tom", "Ana", "Sam", "Lea", "Ben", "Mia", "Raj", "Zoe")
THINGS = ("apples", "pens", "books", "coins", "cards", "shells", "stamps", "marbles")
SHORT_WORDS = ("cat", "sun", "tree", "book", "lamp", "fish", "door", "milk")
LONG_WORDS = ("garden", "window", "planet", "bottle", "pencil", "kitchen", "rabbit", "orange")


def _add(rng: random.Random, level: int) -> tuple[str, int]:
    (lo, hi), (lo2, hi2) = (((2, 9), (2, 9)), ((10, 49), (10, 49)), ((100, 499), (10, 99)))[
        level - 1
    ]
    a, b = rng.randint(lo, hi), rng.randint(lo2, hi2)
    return f"What is {a} + {b}?", a + b


def _sub(rng: random.Random, level: int) -> tuple[str, int]:
    a = rng.randint(*((5, 9), (20, 99), (100, 999))[level - 1])
    b = rng.randint(1 if level == 1 else 10, a - 1)
    return f"What is {a} - {b}?", a - b


def _mul(rng: random.Random, level: int) -> tuple[str, int]:
    (lo, hi), (lo2, hi2) = (((2, 5), (2, 5)), ((3, 9), (3, 9)), ((11, 19), (3, 9)))[level - 1]
    a, b = rng.randint(lo, hi), rng.randint(lo2, hi2)
    return f"What is {a} * {b}?", a * b


def _word(rng: random.Random, level: int) -> tuple[str, int]:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    if level == 1:
        x, y = rng.randint(2, 9), rng.randint(2, 9)
    else:
        x, y = rng.randint(10, 40), rng.randint(2, 20)
    if level < 3:
        question = f"{name} has {x} {thing} and gets {y} more. How many {thing} does {name} have?"
        return question, x + y
    z = rng.randint(1, x + y - 1)
    question = (
        f"{name} has {x} {thing}, gets {y} more, then gives away {z}. "
        f"How many {thing} does {name} have now?"
    )
    return question, x + y - z


def _two_step(rng: random.Random, level: int) -> tuple[str, int]:
    if level == 1:
        a, b, c = (rng.randint(1, 9) for _ in range(3))
        return f"What is {a} + {b} + {c}?", a + b + c
    a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 20)
    if level == 2:
        return f"What is {a} * {b} + {c}?", a * b + c
    return f"What is ({a} + {c}) * {b}?", (a + c) * b


def _compare(rng: random.Random, level: int) -> tuple[str, int]:
    if level == 1:
        a, b = rng.sample(range(10, 99), 2)
        return f"Which number is larger, {a} or {b}?", max(a, b)
    numbers = rng.sample(range(10, 99), 3)
    if level == 2:
        return f"Which number is the largest: {', '.join(map(str, numbers))}?", max(numbers)
    return f"Which number is the smallest: {', '.join(map(str, numbers))}?", min(numbers)


def _count(rng: random.Random, level: int) -> tuple[str, int]:
    word = rng.choice(SHORT_WORDS if level == 1 else LONG_WORDS)
    if level < 3:
        return f"How many letters are in the word '{word}'?", len(word)
    letter = rng.choice(sorted(set(word)))
    return f"How many times does the letter '{letter}' appear in '{word}'?", word.count(letter)


ARITHMETIC_KINDS: dict[str, Callable[[random.Random, int], tuple[str, int]]] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "word": _word,
    "two_step": _two_step,
    "compare": _compare,
    "count": _count,
}
"""Arithmetic task kind -> (rng, level 1-3) -> (question, exact answer)."""

# --------------------------------------------------------------------------- retrieval

_COUNTRY_PARTS = (
    ("Val", "Kes", "Mor", "Tal", "Ost", "Bren", "Cal", "Dun", "Eld", "Fen", "Gar", "Hal"),
    ("doria", "tria", "avia", "mark", "onia", "esta", "ora", "ivia"),
)
_CITY_PARTS = (
    ("Ash", "Bel", "Cor", "Dra", "Elm", "Fal", "Gil", "Har", "Kel", "Lor", "Mir", "Pel", "Quen",
     "Rav", "Sel", "Tor"),
    ("ford", "wick", "haven", "mere", "gate", "stead", "holm", "bury", "moor", "crest", "fell",
     "mouth"),
)  # fmt: skip
_TOWN_PARTS = (
    ("Brook", "Stone", "Thorn", "Wil", "Ald", "Birch", "Crag", "Fern"),
    ("ton", "by", "dale", "ley", "worth", "field", "wood", "port"),
)
COUNTRIES = tuple(a + b for a in _COUNTRY_PARTS[0] for b in _COUNTRY_PARTS[1])
"""The invented republics `capital` tasks ask about."""
CITIES = tuple(a + b for a in _CITY_PARTS[0] for b in _CITY_PARTS[1])
"""The invented cities: each is the capital or the largest port of one republic."""
_SHUFFLED_CITIES = random.Random("generated:cities").sample(CITIES, len(CITIES))
TOWNS = tuple(a + b for a in _TOWN_PARTS[0] for b in _TOWN_PARTS[1])
"""The invented towns `founded` tasks ask about."""
DISTRACTORS = 3
"""Other places of the same sort whose passage of the asked fact each retrieval task
carries."""
NAME_WORDS = 12
"""`name_correct`: the most words a reply may have to be read as naming a place."""
_CITY_WORDS = frozenset(normalize_text(c) for c in CITIES)


def _country_facts(country: str) -> tuple[str, str]:
    """(capital, largest port) of `country`: two cities of a fixed shuffle of `CITIES`
    that no other republic has."""
    i = COUNTRIES.index(country)
    return _SHUFFLED_CITIES[2 * i], _SHUFFLED_CITIES[2 * i + 1]


def _town_years(town: str) -> tuple[int, int]:
    """(founding year, charter year) of `town`, fixed by its name alone."""
    rng = random.Random(f"town:{town}")
    founded = rng.randint(1100, 1850)
    return founded, founded + rng.randint(15, 140)


def country_passages(country: str) -> tuple[Document, Document]:
    """The passages about `country`: its capital, and its largest port. One fact a
    passage: given three passages, SmolLM2-135M read the answer out of one-fact passages
    in 7 of 24 tasks, out of passages holding both facts in 2."""
    capital, port = _country_facts(country)
    return (
        Document(f"{country}-capital", f"The capital of {country} is {capital}.", country),
        Document(f"{country}-port", f"The largest port of {country} is {port}.", country),
    )


def town_passages(town: str) -> tuple[Document, Document]:
    """The passages about `town`: the year it was founded, and the year it received its
    town charter."""
    founded, charter = _town_years(town)
    return (
        Document(f"{town}-founded", f"The town of {town} was founded in {founded}.", town),
        Document(
            f"{town}-charter", f"The town of {town} received its town charter in {charter}.", town
        ),
    )


Fact = tuple[str, str, tuple[Document, ...]]
"""A drawn retrieval task: (question, exact answer, its passages)."""


def _passages(
    rng: random.Random,
    names: tuple[str, ...],
    name: str,
    passages: Callable[[str], tuple[Document, Document]],
    needed: tuple[int, ...],
) -> tuple[Document, ...]:
    """The `needed` passages of `name` (in the order a reader follows them), its other
    passage, and the passage of the first needed fact for `DISTRACTORS` other names."""
    own = passages(name)
    others = rng.sample([n for n in names if n != name], DISTRACTORS)
    rest = tuple(d for i, d in enumerate(own) if i not in needed)
    return (*(own[i] for i in needed), *rest, *(passages(n)[needed[0]] for n in others))


def _capital(rng: random.Random, level: int) -> Fact:
    country = rng.choice(COUNTRIES)
    capital, port = _country_facts(country)
    question, answer, needed = (
        (f"What is the capital of the republic of {country}?", capital, (0,)),
        (f"What is the largest port of the republic of {country}?", port, (1,)),
        (f"What is the capital of the republic whose largest port is {port}?", capital, (1, 0)),
    )[level - 1]
    return question, answer, _passages(rng, COUNTRIES, country, country_passages, needed)


def _founded(rng: random.Random, level: int) -> Fact:
    town = rng.choice(TOWNS)
    founded, charter = _town_years(town)
    question, answer, needed = (
        (f"In what year was the town of {town} founded?", founded, (0,)),
        (f"In what year did the town of {town} receive its town charter?", charter, (1,)),
        (
            f"How many years after it was founded did the town of {town} receive its town charter?",
            charter - founded,
            (0, 1),
        ),
    )[level - 1]
    return question, str(answer), _passages(rng, TOWNS, town, town_passages, needed)


RETRIEVAL_KINDS: dict[str, Callable[[random.Random, int], Fact]] = {
    "capital": _capital,
    "founded": _founded,
}
"""Retrieval task kind -> (rng, level 1-3) -> (question, exact answer, passages: those
the answer needs first, in the order a reader follows them, then the place's other
passage and the same fact of `DISTRACTORS` other places of its sort). Levels: `capital`
asks a republic's capital, its largest port, or the capital of the republic whose port
it names (two passages, one after the other); `founded` asks a town's founding year, its
charter year, or the years between them (both passages)."""
TASK_KINDS: tuple[str, ...] = (*ARITHMETIC_KINDS, *RETRIEVAL_KINDS)
"""Every task kind, arithmetic first."""
LEVELS = (1, 2, 3)
EVERY_CELL: tuple[tuple[str, int], ...] = tuple((k, level) for k in TASK_KINDS for level in LEVELS)
"""Every (kind, level), kinds in `TASK_KINDS` order."""


def name_correct(answer: str | None, truth: str | None) -> bool | None:
    """A place name: the normalized reply is the truth, or it is a short reply (at most
    `NAME_WORDS` words) whose only city name is the truth ("The capital is Ashford")."""
    plain = is_correct(answer, truth)
    if plain is not False or answer is None:
        return plain
    words = normalize_text(str(answer)).split()
    named = {w for w in words if w in _CITY_WORDS}
    return len(words) <= NAME_WORDS and named == {normalize_text(str(truth))}


def grade(answer: str | None, truth: str | int | float | None) -> bool | None:
    """(answer, truth) -> whether the answer is right: a numeric truth by the math checker
    (`orchrm.tasks.answers.math_correct`), a place name by `name_correct`."""
    if truth is None or as_number(str(truth)) is not None:
        return math_correct(answer, truth)
    return name_correct(answer, str(truth))


@dataclass(frozen=True)
class GeneratedTask:
    """A generated task, its kind and level, and the passages it brings to the search
    corpus (none for arithmetic)."""

    task: Task
    kind: str
    level: int
    documents: tuple[Document, ...] = ()


DRAWS_TO_EXHAUST = 200
"""`split_tasks`: draws in a row of one cell that find no question not drawn before, after
which the cell is taken to have no more (`mul1`, 16 questions, is the smallest)."""


@dataclass(frozen=True)
class Shortfall:
    """A part that got fewer tasks of a cell than it asked: the cell ran out of questions
    not drawn before."""

    part: str
    cell: tuple[str, int]
    asked: int
    got: int
    distinct: int
    """Distinct questions the cell gave over every part."""

    def line(self) -> str:
        kind, level = self.cell
        return (
            f"{self.part}: {self.got} of the {self.asked} {kind}{level} tasks asked: the cell "
            f"has no question beyond the {self.distinct} drawn (no new one in "
            f"{DRAWS_TO_EXHAUST} draws), and no question is drawn twice"
        )


@dataclass(frozen=True)
class TaskSplit:
    """Parts of tasks drawn from one pool without replacement (`split_tasks`): no
    question, by `question_key`, is in two parts or twice in one."""

    parts: dict[str, list[GeneratedTask]]
    short: tuple[Shortfall, ...] = ()

    def __getitem__(self, part: str) -> list[GeneratedTask]:
        return self.parts[part]

    def sizes(self) -> dict[str, int]:
        """Tasks in each part."""
        return {part: len(tasks) for part, tasks in self.parts.items()}

    def lines(self) -> list[str]:
        """One line a part (its tasks and distinct questions), then one a shortfall."""
        out = [
            f"{part}: {len(tasks)} tasks, {len({question_key(t.task.question) for t in tasks})} "
            "distinct questions"
            for part, tasks in self.parts.items()
        ]
        return out + [s.line() for s in self.short]


def split_tasks(cells: tuple[tuple[str, int], ...], sizes: dict[str, int], seed: int) -> TaskSplit:
    """Parts of tasks (`sizes`: part name -> tasks), drawn from one pool without
    replacement: each part cycles through the (kind, level) `cells` (task i of part P is
    cell i mod len(cells), id `P-<i>-<kind><level>`), drawn from its own stream (part j
    of `sizes` from `seed + j` and its name), and a question any part already holds, by
    `question_key`, is drawn again. A cell with no new question in `DRAWS_TO_EXHAUST`
    draws gives the parts that still ask for it fewer tasks, each `Shortfall` recorded
    for the caller to say; a part left with no task at all raises ConfigError."""
    seen: set[str] = set()
    exhausted: set[tuple[str, int]] = set()
    parts: dict[str, list[GeneratedTask]] = {}
    wanted: dict[tuple[str, tuple[str, int]], int] = {}
    for j, (part, n) in enumerate(sizes.items()):
        rng = random.Random(f"real-exec:{part}:{seed + j}")
        parts[part] = []
        for i in range(n):
            kind, level = cell = cells[i % len(cells)]
            wanted[(part, cell)] = wanted.get((part, cell), 0) + 1
            drawn = None if cell in exhausted else _new_question(kind, level, rng, seen)
            if drawn is None:
                exhausted.add(cell)
                continue
            question, answer, documents = drawn
            seen.add(question_key(question))
            task = Task(f"{part}-{i:03d}-{kind}{level}", question, str(answer), DOMAIN)
            parts[part].append(GeneratedTask(task, kind, level, documents))
        if n and not parts[part]:
            raise ConfigError(f"no task left for {part!r}: every cell ran out of questions")
    got = {(p, (t.kind, t.level)): 0 for p in parts for t in parts[p]}
    for p, tasks in parts.items():
        for t in tasks:
            got[(p, (t.kind, t.level))] += 1
    distinct = {c: sum(v for (_, cc), v in got.items() if cc == c) for c in exhausted}
    short = tuple(
        Shortfall(p, c, asked, got.get((p, c), 0), distinct[c])
        for (p, c), asked in wanted.items()
        if c in exhausted and got.get((p, c), 0) < asked
    )
    return TaskSplit(parts, short)


def _new_question(
    kind: str, level: int, rng: random.Random, seen: set[str]
) -> tuple[str, int | str, tuple[Document, ...]] | None:
    for _ in range(DRAWS_TO_EXHAUST):
        drawn = _draw(kind, rng, level)
        if question_key(drawn[0]) not in seen:
            return drawn
    return None


def make_tasks(
    cells: tuple[tuple[str, int], ...], n: int, seed: int, prefix: str
) -> list[GeneratedTask]:
    """`n` tasks with distinct questions, cycling through the (kind, level) `cells`:
    `split_tasks` with one part, `prefix`, drawn from `seed` (a cell that runs out of
    questions gives fewer). Tasks to train on and tasks to hold out come from one
    `split_tasks` call, never from two `make_tasks` calls."""
    return split_tasks(cells, {prefix: n}, seed)[prefix]


def _draw(kind: str, rng: random.Random, level: int) -> tuple[str, int | str, tuple[Document, ...]]:
    if kind in RETRIEVAL_KINDS:
        return RETRIEVAL_KINDS[kind](rng, level)
    question, answer = ARITHMETIC_KINDS[kind](rng, level)
    return question, answer, ()


def corpus_documents(tasks: list[GeneratedTask]) -> list[Document]:
    """The passages `tasks` carry, each id once, in task order."""
    docs: dict[str, Document] = {}
    for t in tasks:
        for d in t.documents:
            docs.setdefault(d.id, d)
    return list(docs.values())


def corpus(tasks: list[GeneratedTask]) -> BM25Retriever:
    """The BM25 corpus the web-search sub-agent searches for `tasks`: their passages
    pooled (`corpus_documents`)."""
    return BM25Retriever(corpus_documents(tasks))


def every_passage() -> list[Document]:
    """Both passages of every republic (`COUNTRIES`) and every town (`TOWNS`)."""
    return [d for c in COUNTRIES for d in country_passages(c)] + [
        d for t in TOWNS for d in town_passages(t)
    ]


def world_corpus() -> BM25Retriever:
    """The BM25 corpus of `every_passage`: the same whichever tasks are drawn, so a run of
    a plan searched in it stays valid when more tasks are drawn beside its task."""
    return BM25Retriever(every_passage())


def save_corpus(tasks: list[GeneratedTask], path: str | Path) -> Path:
    """Write the passages of `tasks` as a corpus file (`id`, `title`, `text` a line) that
    `orchrm.runtime.retrieval.load_corpus` and `orchrm run --corpus` read."""
    rows = [{"id": d.id, "title": d.title, "text": d.text} for d in corpus_documents(tasks)]
    write_jsonl(rows, path)
    return Path(path)


def save_tasks(tasks: list[GeneratedTask], path: str | Path) -> Path:
    """Write `tasks` as JSONL, one `{id, question, answer, domain, kind, level}` a line, and
    a retrieval task's passages as `documents` (`{id, title, text}` each)."""
    rows = [
        {"id": t.task.id, "question": t.task.question, "answer": t.task.answer,
         "domain": t.task.domain, "kind": t.kind, "level": t.level,
         **({"documents": [{"id": d.id, "title": d.title, "text": d.text} for d in t.documents]}
            if t.documents else {})}
        for t in tasks
    ]  # fmt: skip
    write_jsonl(rows, path)
    return Path(path)


def load(path: str | Path) -> list[GeneratedTask]:
    """The tasks of a file `save_tasks` wrote, in file order. A missing file, a record
    without one of its fields, an unknown kind or level, a passage without its id or
    text, or an id twice raises InputError naming the file and line."""
    path = existing(path)
    out = []
    for line_no, record in jsonl_objects(path):
        where = f"{path}:{line_no}"
        kind = required(where, record, "kind")
        level = required(where, record, "level", int)
        if kind not in TASK_KINDS or level not in LEVELS:
            raise InputError(f"{where}: no task kind {kind!r} at level {level}")
        task = Task(
            str(required(where, record, "id", (str, int))),
            required(where, record, "question"),
            str(required(where, record, "answer", (str, int))),
            str(record.get("domain") or DOMAIN),
        )
        out.append(GeneratedTask(task, kind, level, _documents(where, record)))
    check_unique_ids(path, [t.task for t in out])
    return out


def _documents(where: str, record: dict) -> tuple[Document, ...]:
    docs = record.get("documents") or []
    if not isinstance(docs, list) or not all(
        isinstance(d, dict) and isinstance(d.get("id"), str) and isinstance(d.get("text"), str)
        for d in docs
    ):
        raise InputError(f"{where}: 'documents' is not a list of {{id, title, text}} passages")
    return tuple(Document(d["id"], d["text"], str(d.get("title") or "")) for d in docs)
