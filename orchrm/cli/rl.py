"""`orchrm rl`: train the orchestrator (the command-line face of `orchrm.rl.pipeline`)."""

from __future__ import annotations

from pathlib import Path

import typer

from orchrm.rl.config import RLConfig

_D = RLConfig()


def rl_command(
    out: Path = typer.Option(Path(_D.out), "--out", help="Folder for everything the run writes."),
    reward: str = typer.Option(_D.reward, "--reward", help="GRPO reward: orchrm | execution."),
    method: str = typer.Option(_D.method, "--method", help="grpo | rft | dpo."),
    steps: int = typer.Option(_D.steps, "--steps", min=1, help="Optimizer steps."),
    rm: Path = typer.Option(
        None, "--rm", help="Reward-model directory; default: train one into OUT/rm (or reuse)."
    ),
    policy: Path = typer.Option(
        None,
        "--policy",
        help="Starting policy (causal-LM directory); default: build the offline one into "
        "OUT/policy (or reuse).",
    ),
    compare: bool = typer.Option(
        False, "--compare", help="Train every run in --runs from the same start; one table."
    ),
    runs: str = typer.Option(
        "grpo-orchrm,grpo-execution,rft,dpo", "--runs", help="Runs for --compare."
    ),
    preset: str = typer.Option(_D.preset, "--preset", help="World preset."),
    tasks: str = typer.Option(
        "",
        "--tasks",
        help="Your own tasks instead of the world's: a JSONL of questions, or NAME:PATH "
        "(aime, hotpotqa, browsecomp-plus, gpqa). Orch-RM-reward GRPO only; needs --policy "
        "and --rm.",
    ),
    chat: bool = typer.Option(
        None,
        "--chat/--no-chat",
        help="Full orchestrator prompt as chat messages (default: when the policy's "
        "tokenizer has a chat template).",
    ),
    lora_r: int = typer.Option(_D.lora_r, "--lora-r", min=0, help="LoRA rank (0: full)."),
    lora_alpha: int = typer.Option(_D.lora_alpha, "--lora-alpha", min=1),
    vllm: bool = typer.Option(False, "--vllm", help="Sample with vLLM (GPU, colocated)."),
    lr: float = typer.Option(_D.lr, "--lr", help="Peak learning rate."),
    beta: float = typer.Option(_D.beta, "--beta", help="GRPO KL coefficient (0: none)."),
    num_generations: int = typer.Option(
        _D.num_generations, "--num-generations", min=2, help="GRPO group size."
    ),
    prompts_per_step: int = typer.Option(_D.prompts_per_step, "--prompts-per-step", min=1),
    scale_rewards: str = typer.Option(
        _D.scale_rewards, "--scale-rewards", help="none (r - group mean) | group | batch."
    ),
    penalty: float = typer.Option(
        None, "--penalty", help="Reward of an unparseable or invalid orchestration."
    ),
    eval_tasks: int = typer.Option(_D.eval_tasks, "--eval-tasks", min=1),
    eval_samples: int = typer.Option(_D.eval_samples, "--eval-samples", min=1),
    train_tasks: int = typer.Option(_D.train_tasks, "--train-tasks", min=1),
    seed: int = typer.Option(_D.seed, "--seed"),
    threads: int = typer.Option(_D.num_threads, "--threads", min=1, help="PyTorch CPU threads."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
) -> None:
    """Train the orchestrator: GRPO with Orch-RM (no sub-agent runs) or execution as the
    reward, or the RFT and DPO baselines; evaluate on held-out world tasks; write
    OUT/<run>/report.md (or OUT/report.md with --compare), report.json and curve.png."""
    from rich.console import Console

    from orchrm.rl.pipeline import compare as run_compare
    from orchrm.rl.pipeline import run, run_tasks

    console = Console()
    config = RLConfig(
        out=str(out),
        method=method,
        reward=reward,
        steps=steps,
        policy=str(policy) if policy else "",
        rm=str(rm) if rm else "",
        preset=preset,
        tasks=tasks,
        chat=chat,
        lora_r=lora_r,
        lora_alpha=lora_alpha,
        vllm=vllm,
        lr=lr,
        beta=beta,
        num_generations=num_generations,
        prompts_per_step=prompts_per_step,
        scale_rewards=scale_rewards,
        penalty=penalty,
        eval_tasks=eval_tasks,
        eval_samples=eval_samples,
        train_tasks=train_tasks,
        seed=seed,
        num_threads=threads,
        progress=not quiet,
    )
    say = lambda m: console.print(m, highlight=False)  # noqa: E731
    try:
        config.check()
        if tasks:
            report = run_tasks(config, say)
        elif compare:
            report = run_compare(config, [r.strip() for r in runs.split(",") if r.strip()], say)
        else:
            report = run(config, say)
    except ValueError as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(2) from None
    console.print(report.read_text(), highlight=False)
    console.print(f"report -> {report}")
