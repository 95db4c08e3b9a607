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
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from orchrm.experiments.gpu_check.work import MIB, Peak, Row, Work, steady_rows
from orchrm.training.throughput import StepClock

PARTS = ("train", "trl", "score", "serve", "rl")


def _sync(cuda: bool) -> None:
    if cuda:
        import torch

        torch.cuda.synchronize()


def part_train(work: Work) -> list[Row]:
    """`orchrm train`'s loop on the random backbone (module docstring). Each optimizer
    step (`orchrm.training.train._train_step`) is wrapped by the step clock for the run."""
    import orchrm.training.train as loop
    from orchrm.memplan.plan import plan_from_train_config
    from orchrm.training.config import TrainConfig

    s = work.sizes
    config = TrainConfig(
        pairs=str(work.pairs),
        out=str(work.folder / "orchrm-train"),
        backbone=str(work.rm_backbone),
        max_length=s.max_length,
        batch_size=1,
        max_steps=s.train_steps,
        eval_every=s.train_steps,
        lora=True,
        lora_r=s.lora_r,
        lora_alpha=s.lora_r,
        dtype=work.dtype,
        gradient_checkpointing=True,
        peak_flops=work.peak_flops,
        seed=0,
    )
    plan = plan_from_train_config(config)
    clock, seen = StepClock(work.cuda), {}
    step = loop._train_step

    def timed_step(run, batch):
        before = run.meter.tokens
        clock.begin()
        try:
            return step(run, batch)
        finally:
            clock.end(run.meter.tokens - before)
            seen["flops_per_token"] = run.meter.flops_per_token

    loop._train_step = timed_step
    try:
        with Peak(work.cuda) as peak:
            summary = loop.train(config, progress=False)
    finally:
        loop._train_step = step
        shutil.rmtree(config.out, ignore_errors=True)  # the merged model: the backbone's size
    r = steady_rows(clock, seen["flops_per_token"], work.peak_flops)
    r |= {"peak_mib": peak.bytes / MIB, "plan_peak_mib": plan.memory.peak / MIB,
          "summary_pairs_per_s": summary.pairs_per_second, "summary_mfu": summary.mfu}  # fmt: skip
    work.results["train"] = r
    steps = f"steps 2-{s.train_steps}"
    return [
        Row("train", "pairs/s", r["pairs_per_s"],
            f"orchrm train, {steps}; all {s.train_steps}: {summary.pairs_per_second:.3g}"),
        Row("train", "tokens/s", r["tokens_per_s"], f"2 x {s.max_length} tokens a step"),
        Row("train", "MFU", r["mfu"],
            f"4N + 2N_trained a token, of {work.peak_flops / 1e12:.3g} TFLOP/s; goal >= 0.35"),
        Row("train", "peak memory MiB", r["peak_mib"],
            f"plan {r['plan_peak_mib']:,.0f} MiB (measured/plan "
            f"{r['peak_mib'] / r['plan_peak_mib']:.2f})"),
        Row("train", "first step s", r["first_step_s"], "left out of the rates above"),
    ]  # fmt: skip


def part_trl(work: Work) -> list[Row]:
    """The same steps through TRL's `RewardTrainer` (module docstring)."""
    import datasets
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, TrainerCallback
    from trl import RewardConfig, RewardTrainer

    from orchrm.rl.grpo import quiet_logs
    from orchrm.training.data import load_splits, tokenize
    from orchrm.training.throughput import flops_per_token

    s = work.sizes
    clock = StepClock(work.cuda)
    tokens_a_step = 2 * s.max_length

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            clock.begin()

        def on_step_end(self, args, state, control, **kwargs):
            clock.end(tokens_a_step)

    bf16 = work.dtype == "bf16"
    with Peak(work.cuda) as peak:
        tokenizer = AutoTokenizer.from_pretrained(work.rm_backbone)
        model = AutoModelForSequenceClassification.from_pretrained(
            work.rm_backbone, num_labels=1, dtype=torch.bfloat16 if bf16 else torch.float32
        )
        records, _ = load_splits(work.pairs)
        ids = tokenize(records, tokenizer, s.max_length)
        if {len(x) for x in ids.chosen + ids.rejected} != {s.max_length}:
            raise RuntimeError(f"the pairs' texts are not all {s.max_length} tokens long")
        data = datasets.Dataset.from_dict({"chosen_ids": ids.chosen, "rejected_ids": ids.rejected})
        config = RewardConfig(
            output_dir=str(work.folder / "trl"),
            max_steps=s.train_steps,
            per_device_train_batch_size=1,
            learning_rate=5e-5,
            warmup_steps=0.1,
            max_length=s.max_length,
            bf16=bf16,
            gradient_checkpointing=True,
            gradient_checkpointing_kwargs={"use_reentrant": False},
            use_cpu=not work.cuda,
            report_to=[],
            save_strategy="no",
            logging_steps=s.train_steps,
            disable_tqdm=True,
            seed=0,
        )
        lora = LoraConfig(task_type="SEQ_CLS", r=s.lora_r, lora_alpha=s.lora_r,
                          lora_dropout=0.05, target_modules="all-linear",
                          modules_to_save=["score"])  # fmt: skip
        trainer = RewardTrainer(model=model, args=config, train_dataset=data,
                                processing_class=tokenizer, peft_config=lora,
                                callbacks=[Clock()])  # fmt: skip
        quiet_logs(trainer, progress=False)
        trainer.train()
        per_token = flops_per_token(trainer.model)
    del trainer, model
    r = steady_rows(clock, per_token, work.peak_flops) | {"peak_mib": peak.bytes / MIB}
    work.results["trl"] = r
    rows = [
        Row("trl", "pairs/s", r["pairs_per_s"], f"TRL RewardTrainer, steps 2-{s.train_steps}"),
        Row("trl", "MFU", r["mfu"], "counted as orchrm's"),
        Row("trl", "peak memory MiB", r["peak_mib"], ""),
    ]
    ours = work.results.get("train")
    if ours:
        rows.append(
            Row("trl", "orchrm/TRL pairs/s", ours["pairs_per_s"] / r["pairs_per_s"],
                f"goal >= 1.3; peak memory orchrm/TRL {ours['peak_mib'] / r['peak_mib']:.2f} "
                "(goal <= 1)")
        )  # fmt: skip
    return rows


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
