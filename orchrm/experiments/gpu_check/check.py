"""One prepared GPU check: the 8B-shaped reward model's training and scoring, serving, and
orchestrator training, as rows of one table (`run_check`; `benchmarks/gpu_check.py` runs
it, docs/gpu.md says how).

Five parts (`PARTS`), each guarded (`run_part`: one that fails gives its error as a row,
its traceback on stderr, and the others still run), in this order:

- `train`: a random-initialized sequence classifier with Llama-3.1-8B's published shape
  (`orchrm.memplan.plan.PRESETS`, rope theta 500,000) and a byte-level BPE tokenizer
  trained on world texts, saved as a backbone directory and trained by `orchrm train`'s
  own loop (`orchrm.training.train.train`): LoRA r 32 on every linear layer, the dtype
  asked for, gradient checkpointing, one pair (two texts of exactly `max_length` tokens)
  a step, 10 steps. Pairs/s, tokens/s and MFU (4N + 2N_trained a token, as `orchrm
  train` counts it) over steps 2 onward, each step timed from its start to the end of
  its optimizer step (`orchrm.training.throughput.StepClock`); the peak memory (CUDA's
  allocator peak; on a CPU the resident high-water mark above the start) beside the
  peak `orchrm train --plan` predicts.
- `trl`: the same backbone, pairs (the same token ids), steps, LoRA, precision and
  checkpointing through TRL's `RewardTrainer`, timed the same way: pairs/s, MFU, peak
  memory, and orchrm's pairs/s and peak memory over TRL's.
- `score`: `OrchRM.load` of the backbone as `orchrm score` loads it, scoring world plans
  made long enough to fill `max_length` tokens: orchestrations/s and MFU (2N a token);
  then best-of-8 (`orchrm.selection.selectors.RewardModelSelector`) over plans cut to
  512 tokens: selections/s.
- `serve`: `orchrm serve` with the offline MiniLM saved untrained (as the serve tests
  do), C concurrent clients for T seconds, micro-batching on and at batch size 1
  (`orchrm.experiments.serve_load.loadgen`'s load): requests/s, latency and the ratio.
- `rl`: `orchrm rl --tasks` (`orchrm.experiments.rl_world.pipeline.grpo_on_tasks`) with a
  random Qwen2-0.5B-shaped policy (its own BPE tokenizer, no chat template) and a LoRA,
  5 GRPO steps with the Orch-RM reward of the MiniLM model: policy tokens generated per
  second over steps 2 onward. A random policy writes no valid plan, so the reward model
  scores none; its cost is the `score` part's.

The sizes (`orchrm.experiments.gpu_check.work.GPU`) are meant for one H200 within 8 minutes;
`TINY` shrinks every model and length so that the whole check runs on a CPU in well under
a minute. MFU is measured against the GPU's dense bf16 peak
(`orchrm.training.throughput.PEAK_FLOPS`); on a CPU, against this machine's measured
matmul rate.
"""

from __future__ import annotations

import gc
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from orchrm.experiments.gpu_check.training import part_train, part_trl
from orchrm.experiments.gpu_check.work import Row, Work

PARTS = ("train", "trl", "score", "serve", "rl")


def _sync(cuda: bool) -> None:
    if cuda:
        import torch

        torch.cuda.synchronize()


def part_score(work: Work) -> list[Row]:
    """Scoring at `max_length` tokens and best-of-8 at `bon_length` (module docstring)."""
    from orchrm.memplan.shapes import count_parameters, read_backbone
    from orchrm.scoring.local import OrchRM
    from orchrm.selection.selectors import Candidate, CandidateSet, RewardModelSelector

    s = work.sizes
    loaded = OrchRM.load(work.rm_backbone, dtype=work.dtype, check_version=False)

    def scorer(max_length: int) -> OrchRM:
        return OrchRM(loaded.model, loaded.tokenizer, {"max_length": max_length},
                      loaded.device, loaded.bf16, s.score_batch)  # fmt: skip

    long = scorer(s.max_length)
    long.score(work.long_plans(s.score_batch, "warm-up", s.max_length))  # kernels, memory
    items = work.long_plans(s.score_n, "plan", s.max_length)
    _sync(work.cuda)
    start = time.perf_counter()
    scored = long.score(items)
    _sync(work.cuda)
    seconds = time.perf_counter() - start
    tokens = sum(x.tokens for x in scored)
    shape = read_backbone(loaded.model.config)
    matmul = count_parameters(shape).matmul
    mfu = 2 * matmul * tokens / seconds / work.peak_flops
    attention = 4 * shape.num_layers * (tokens / len(scored)) * shape.q_width / (2 * matmul)

    short = scorer(s.bon_length)

    def tasks(tag: str, n: int) -> list[CandidateSet]:
        plans = work.long_plans(n * s.candidates, tag, s.bon_length)
        return [
            CandidateSet(f"{tag}{t}", plans[t * s.candidates][0],
                         tuple(Candidate(o) for _, o in plans[t * s.candidates:][:s.candidates]))
            for t in range(n)
        ]  # fmt: skip

    RewardModelSelector(short).warm(tasks("warm-up", max(1, s.score_batch // s.candidates)))
    chosen = tasks("task", s.bon_tasks)
    selector = RewardModelSelector(short)
    _sync(work.cuda)
    start = time.perf_counter()
    selector.warm(chosen)
    picks = [selector(t) for t in chosen]
    _sync(work.cuda)
    bon_seconds = time.perf_counter() - start
    bon_tokens = sum(p.verification_tokens for p in picks) / len(picks) / s.candidates
    r = {"orchestrations_per_s": len(scored) / seconds, "mfu": mfu,
         "tokens_per_orchestration": tokens / len(scored), "attention_share": attention,
         "selections_per_s": len(picks) / bon_seconds, "bon_tokens": bon_tokens}  # fmt: skip
    work.results["score"] = r
    return [
        Row("score", "orchestrations/s", r["orchestrations_per_s"],
            f"{r['tokens_per_orchestration']:,.0f} tokens each, batch {s.score_batch}, "
            f"{loaded.dtype}"),
        Row("score", "MFU", mfu, f"2N a token (attention would add {attention:.0%}); "
            "goal >= 0.45"),
        Row("score", "best-of-8 selections/s", r["selections_per_s"],
            f"{s.bon_tasks} tasks x {s.candidates} plans of {bon_tokens:,.0f} tokens"),
    ]  # fmt: skip


def part_serve(work: Work) -> list[Row]:
    """`orchrm serve` under `orchrm.experiments.serve_load.loadgen`'s load, batched and at
    batch size 1."""
    from orchrm.experiments.serve_load.loadgen import LoadSettings, request_bodies, run_phase

    s = work.sizes
    load = LoadSettings(clients=s.clients, seconds=s.serve_seconds, route="score",
                        per_request=1, warmup=s.serve_warmup, threads=s.threads)  # fmt: skip
    bodies = request_bodies("score", 1)
    on, off = (run_phase(m, "clean", load, work.minilm, bodies) for m in ("on", "off"))
    work.results["serve"] = {"on": on, "off": off}
    model = work.results.get("notes", {}).get("minilm", "MiniLM")
    what = f"{s.clients} clients x {s.serve_seconds:g} s, {model}"

    def latency(r: dict) -> str:
        return f"p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms, errors {r['errors']}"

    return [
        Row("serve", "requests/s micro-batched", on["req_s"],
            f"{what}; mean batch {on['mean_batch']:.1f}, {latency(on)}"),
        Row("serve", "requests/s batch size 1", off["req_s"], latency(off)),
        Row("serve", "micro-batched / batch size 1", on["req_s"] / off["req_s"], "goal >= 2"),
    ]  # fmt: skip


def part_rl(work: Work) -> list[Row]:
    """`orchrm rl --tasks` with a random Qwen2-0.5B-shaped policy (module docstring)."""
    from orchrm.experiments.rl_world.config import RLExperimentConfig
    from orchrm.experiments.rl_world.pipeline import grpo_on_tasks
    from orchrm.jsonl import read_jsonl, write_jsonl
    from orchrm.rl.config import GRPOConfig, PolicyConfig
    from orchrm.rl.policy import policy_prompt, train_tokenizer
    from orchrm.world.tasks import generate_tasks

    s = work.sizes
    tasks = generate_tasks("math", 4 * s.prompts_per_step * s.rl_steps, seed=1)
    task_file = work.folder / "rl-tasks.jsonl"
    write_jsonl([{"id": t.id, "question": t.question, "answer": t.answer} for t in tasks],
                task_file)  # fmt: skip
    corpus = [policy_prompt(t.question) for t in tasks] + [work.filler[:20000]]
    vocab = min(s.tokenizer_vocab, s.policy_shape["vocab_size"])
    policy = work.random_model("policy", s.policy_shape, train_tokenizer(corpus, vocab), True)
    config = RLExperimentConfig(
        out=str(work.folder / "rl"),
        policy=PolicyConfig(model=str(policy), steps=s.rl_steps, lr=1e-5,
                            max_completion_length=s.completion_length, save_steps=s.rl_steps,
                            progress=False),
        grpo=GRPOConfig(num_generations=s.generations, prompts_per_step=s.prompts_per_step,
                        lora_r=s.lora_r, lora_alpha=s.lora_r),
        rm=str(work.minilm),
        tasks=str(task_file),
        chat=False,
    )  # fmt: skip
    start = time.perf_counter()
    grpo_on_tasks(config, say=lambda _: None)
    seconds = time.perf_counter() - start
    ledger = [row for _, row in read_jsonl(Path(config.out) / config.run_name / "tokens.jsonl")]
    steady = ledger[1:] if len(ledger) > 1 else ledger
    span = ledger[-1]["time"] - ledger[0]["time"] if len(ledger) > 1 else seconds
    r = {
        "policy_tokens_per_s": sum(x["policy"] for x in steady) / span,
        "seconds_per_step": span / max(1, len(ledger) - 1),
        "steps": len(ledger),
        "valid": sum(x["valid"] for x in ledger) / len(ledger),
        "rm_tokens": sum(x["rm"] for x in ledger),
        "seconds": seconds,
    }
    work.results["rl"] = r
    samples = f"{s.generations} samples x {s.prompts_per_step} prompts"
    return [
        Row("rl", "policy tokens/s", r["policy_tokens_per_s"],
            f"GRPO steps 2-{s.rl_steps}, {samples}, up to {s.completion_length} tokens, LoRA "
            f"r {s.lora_r}; valid {r['valid']:.0%}, reward-model tokens {r['rm_tokens']}"),
        Row("rl", "seconds a step", r["seconds_per_step"], f"all: {seconds:.0f} s with loading"),
    ]  # fmt: skip


RUNNERS: dict[str, Callable[[Work], list[Row]]] = {
    "train": part_train, "trl": part_trl, "score": part_score, "serve": part_serve,
    "rl": part_rl,
}  # fmt: skip


def run_part(name: str, work: Work) -> list[Row]:
    """The part's rows, then its wall time; an exception becomes an `error` row (the
    traceback on stderr) and the next part runs."""
    start = time.perf_counter()
    try:
        rows = RUNNERS[name](work)
    except (Exception, SystemExit) as err:  # a server that does not start exits
        traceback.print_exc(file=sys.stderr)
        message = " ".join(str(err).split())[:200] or type(err).__name__
        rows = [Row(name, "error", None, f"{type(err).__name__}: {message}")]
        work.results[name] = {"error": rows[0].note}
    finally:
        gc.collect()
        if work.cuda:
            import torch

            torch.cuda.empty_cache()
    rows.append(Row(name, "part seconds", time.perf_counter() - start, ""))
    return rows


def header(work: Work) -> str:
    """The check's first line: sizes, device, dtype, and the torch and transformers
    versions."""
    import torch
    import transformers

    where = (
        torch.cuda.get_device_name(0) if work.cuda else f"CPU, {torch.get_num_threads()} threads"
    )
    return (f"gpu_check ({work.sizes.name}): {where}, {work.dtype}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}")  # fmt: skip


def run_check(
    work: Work, parts: list[str], row_done: Callable[[Row], None] = lambda row: None
) -> list[Row]:
    """Every part of `parts` in turn on `work`; each row is passed to `row_done` as it
    comes, then all are returned."""
    rows = []
    for name in parts:
        for row in run_part(name, work):
            row_done(row)
            rows.append(row)
    return rows
