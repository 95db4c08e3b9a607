"""`plan_text`: a training plan as a terminal shows it, every line within a width."""

from __future__ import annotations

import textwrap

from orchrm.memplan.result import MemoryPlan, TrainingPlan


def size(n: float) -> str:
    """Bytes in binary units: '15.0 GiB', '812 MiB'."""
    if n >= 1024**3:
        return f"{n / 1024**3:.1f} GiB"
    return f"{n / 1024**2:.0f} MiB"


def count(n: int) -> str:
    """A parameter count: '8.03 B', '83.9 M', '12.4 K'."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return str(n)


def _header(plan: TrainingPlan, width: int) -> list[str]:
    trained = (
        f"LoRA r {plan.lora_r}: {count(plan.trainable_parameters)} trainable "
        f"({100 * plan.trainable_parameters / plan.parameters:.2f} %)"
        if plan.lora
        else "full fine-tune"
    )
    sharding = (
        f"ZeRO-{plan.zero_stage} over {plan.num_devices} devices"
        if plan.num_devices > 1
        else f"ZeRO-{plan.zero_stage} on 1 device"
    )
    checkpointing = "on" if plan.gradient_checkpointing else "off"
    pairs = "pair" if plan.micro_batch_pairs == 1 else "pairs"
    texts = (
        f"{2 * plan.micro_batch_pairs} texts of {plan.mean_length or plan.max_length} tokens "
        "packed in one row"
        if plan.packing
        else f"{2 * plan.micro_batch_pairs} x {plan.max_length} tokens"
    )
    details = (
        f"{trained}; {plan.dtype}; {plan.attn_implementation} attention; {texts} a step per device "
        f"({plan.micro_batch_pairs} {pairs}); {sharding}; gradient checkpointing "
        f"{checkpointing}"
    )
    title = (
        f"Training plan: {plan.backbone} ({plan.model_type}), {count(plan.parameters)} parameters"
    )
    return [
        *textwrap.wrap(title, width, subsequent_indent="  ", break_on_hyphens=False),
        *textwrap.wrap(details, width, initial_indent="  ", subsequent_indent="  "),
    ]


def _table(plan: TrainingPlan) -> list[str]:
    """Every ZeRO stage in a column; the chosen one marked with '*'."""
    by = {(m.zero_stage, m.gradient_checkpointing): m for m in plan.table}
    stages = range(4)
    heads = [f"ZeRO-{s}{'*' if s == plan.zero_stage else ''}" for s in stages]
    gc = plan.gradient_checkpointing

    def row(label: str, value) -> str:
        return f"{label:<22}" + "".join(f"{value(s):>10}" for s in stages)

    def part(name: str, checkpointing: bool = gc):
        return lambda s: size(getattr(by[s, checkpointing], name))

    def activations(checkpointing: bool):
        return lambda s: size(by[s, checkpointing].activations)

    return [
        f"{'Memory per device':<22}" + "".join(f"{h:>10}" for h in heads),
        row("weights", part("weights")),
        row("gradients", part("gradients")),
        row("optimizer state", part("optimizer")),
        row("gathered weights", part("gathered")),
        row("activations, no GC", activations(False)),
        row("activations, GC", activations(True)),
        row("total, no GC", part("total", False)),
        row("total, GC", part("total", True)),
        row("peak, no GC", part("peak", False)),
        row("peak, GC", part("peak", True)),
    ]


def _verdict(plan: TrainingPlan, memory: MemoryPlan) -> str:
    checkpointing = "on" if memory.gradient_checkpointing else "off"
    text = (
        f"Asked for (ZeRO-{memory.zero_stage}, checkpointing {checkpointing}): peak "
        f"{size(memory.peak)}, total {size(memory.total)} per device"
    )
    if plan.device_memory is not None:
        fits = "fits" if plan.fits else "does NOT fit"
        text += f"; {fits} in {size(plan.device_memory)}"
    return text


def _time(plan: TrainingPlan) -> str:
    flops = f"{plan.flops_per_step:.3g} FLOPs a step per device"
    if plan.step_seconds is None:
        return f"Time: {flops}; give the peak FLOP/s (a number, or H100, H200, A100) for a time"
    device = f" ({plan.gpu})" if plan.gpu else ""
    return (
        f"Time: {flops}; at MFU {plan.mfu:g} of {plan.peak_flops / 1e12:g} TFLOP/s{device}: "
        f"{plan.step_seconds:.3g} s a step, {plan.pairs_per_second:.3g} pairs/s over "
        f"{plan.num_devices} device{'s' if plan.num_devices > 1 else ''}"
    )


def render(plan: TrainingPlan, width: int) -> str:
    """The header, the memory table, the verdict, the time and the assumptions."""
    wrap = lambda text: textwrap.wrap(text, width, subsequent_indent="  ")  # noqa: E731
    lines = [*_header(plan, width), "", *_table(plan), ""]
    lines += wrap(_verdict(plan, plan.memory))
    lines += wrap(_time(plan))
    lines += wrap("FLOPs " + plan.flops_formula)
    lines += wrap("Assumes " + "; ".join(plan.notes))
    return "\n".join(lines)


def plan_text(plan: TrainingPlan, width: int = 80) -> str:
    """The plan for a terminal: lines of at most `width` characters (at least 64)."""
    return render(plan, max(width, 64))
