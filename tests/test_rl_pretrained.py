"""The pretrained policy (`orchrm.rl.pretrained`): shared-prompt sampling and
log-probabilities against transformers' own, GRPO's update, the bundled SmolLM2 with a
LoRA and the orchestrator prompt, and the GRPO comparison (`orchrm.experiments.rl_real.run`)
at a tiny size, executing on the loopback stand-in of an OpenAI-compatible server.

The tiny policy is a randomly initialized 2-layer Llama with SmolLM2's tokenizer,
seeded, in fp32; the comparison's policy is a 2-layer Llama fitted to write template
plans (`plan_writer_dir`), so GRPO has valid and invalid samples to learn from and the test
checks that the rewarded structure gains probability."""

from __future__ import annotations

import json
import random
import statistics
from contextlib import contextmanager
from dataclasses import replace
from functools import cache

import pytest
import torch
from safetensors.torch import load_file

from orchrm.experiments.real_exec.settings import MIX
from orchrm.experiments.real_exec.tasks import draw_tasks
from orchrm.experiments.rl_real.run import QUICK, RLRealSettings, run
from orchrm.orchestration import DoM, Orchestration, to_harmony
from orchrm.rl.policy import load_policy_tokenizer
from orchrm.rl.pretrained import (
    Sample,
    advantages,
    completion_logprobs,
    grpo_step,
    load_pretrained,
    make_optimizer,
    prompt_ids,
    sample_groups,
    sft_step,
    stop_ids,
)
from orchrm.runtime import prompts
from orchrm.runtime.local_llm import bundled_gguf
from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
from orchrm.tasks.benchmarks.generated import make_tasks
from orchrm.world.orchestrators import Choices
from orchrm.world.templates import STRUCTURES, THINKING, single_plan
from tests.loopback_llm import LoopbackLLM
from tests.samples import tiny_decoder
from tests.test_real_exec import stand_in_reply


@cache
def _tokenizer():
    from transformers import AutoTokenizer

    gguf = bundled_gguf()
    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def _tiny_llama(tokenizer, hidden: int, positions: int, **ids):
    """A randomly initialized 2-layer Llama in fp32 for `tokenizer`, seeded."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **ids,
    )
    return LlamaForCausalLM(config).to(torch.float32)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A saved tiny Llama policy with SmolLM2's tokenizer (a causal-LM directory)."""

    tokenizer = _tokenizer()
    path = tmp_path_factory.mktemp("tiny-policy")
    _tiny_llama(tokenizer, hidden=32, positions=2048).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture
def tiny(tiny_dir):
    model, tokenizer = load_pretrained(tiny_dir, lora_r=4, seed=0)
    with torch.no_grad():  # a LoRA that changes the outputs, so its path is checked too
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5, generator=torch.Generator().manual_seed(1))
    return model, tokenizer


QUESTIONS = ("What is 5 + 8?", "Which is larger, 37 or 73? Answer with the number.")


def test_shared_prompt_sampling_is_greedy_decoding_of_each_prompt(tiny):
    model, tokenizer = tiny
    prompts = [prompt_ids(tokenizer, q) for q in QUESTIONS]
    assert len(prompts[0]) != len(prompts[1])  # left padding is exercised
    drawn = sample_groups(model, tokenizer, prompts, 2, 12, temperature=0)
    for ids, group in zip(prompts, drawn, strict=True):
        with torch.no_grad():
            ref = model.generate(
                input_ids=torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                do_sample=False,
                max_new_tokens=12,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=sorted(stop_ids(tokenizer)),
            )[0, len(ids) :].tolist()
        assert [list(s.ids) for s in group] == [ref, ref]


def test_sampling_is_a_pure_function_of_the_generator_seed(tiny):
    model, tokenizer = tiny
    prompts = [prompt_ids(tokenizer, q) for q in QUESTIONS]

    def draw(seed):
        g = torch.Generator().manual_seed(seed)
        return sample_groups(model, tokenizer, prompts, 3, 10, generator=g)

    assert draw(5) == draw(5)
    assert draw(5) != draw(6)


@pytest.mark.parametrize("prompt_grad", [False, True])
@pytest.mark.parametrize(
    "rows",
    [
        [(0, [11, 12, 13, 14]), (1, [21, 22]), (0, [31])],  # a prompt read for two rows
        [(1, [21, 22, 23]), (1, [41])],  # one prompt of two, for every row
    ],
)
def test_completion_logprobs_are_those_of_a_full_forward_pass(tiny, prompt_grad, rows):
    model, tokenizer = tiny
    prompts = [prompt_ids(tokenizer, q) for q in QUESTIONS]
    logp, mask = completion_logprobs(model, tokenizer, prompts, rows, prompt_grad=prompt_grad)
    assert logp.requires_grad
    for r, (p, completion) in enumerate(rows):
        ids = torch.tensor([prompts[p] + completion])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompts[p]) - 1 : -1]
        ref = torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None])[:, 0]
        assert mask[r].sum() == len(completion)
        torch.testing.assert_close(logp[r, : len(completion)].detach(), ref, atol=1e-4, rtol=0)
        assert torch.all(logp[r, len(completion) :] == 0)


def test_advantages_are_centred_in_each_group():
    assert advantages([1, 0, 0, 1, 2, 2], 3) == pytest.approx(
        [2 / 3, -1 / 3, -1 / 3, -2 / 3, 1 / 3, 1 / 3]
    )
    scaled = advantages([1.0, 0.0, 3.0, 3.0], 2, "group")
    assert scaled == pytest.approx([1.0, -1.0, 0.0, 0.0])


def test_grpo_raises_the_rewarded_sample_and_skips_groups_without_spread(tiny):
    model, tokenizer = tiny
    prompts = [prompt_ids(tokenizer, QUESTIONS[0])]
    good, bad = Sample((101, 102, 103), "good"), Sample((201, 202, 203), "bad")
    optimizer, scheduler = make_optimizer(model, 1e-2, 10)

    def logp(sample):
        with torch.no_grad():
            return completion_logprobs(model, tokenizer, prompts, [(0, sample.ids)])[0].sum()

    before = logp(good) - logp(bad)
    for _ in range(5):
        stats = grpo_step(
            model, tokenizer, optimizer, scheduler, prompts, [[good, bad]], [1.0, 0.0]
        )
        assert stats["computed"] == 2
    assert logp(good) - logp(bad) > before + 0.3
    tied = grpo_step(model, tokenizer, optimizer, scheduler, prompts, [[good, bad]], [0.5, 0.5])
    assert tied["computed"] == 0


@pytest.mark.slow
def test_the_bundled_smollm2_loads_with_a_lora_and_reads_the_orchestrator_prompt():
    model, tokenizer = load_pretrained("smollm2", lora_r=8, seed=0)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    ids = prompt_ids(tokenizer, QUESTIONS[0])
    text = tokenizer.decode(ids)
    assert "<agent_name>" in text and "What is 5 + 8?" in text and len(ids) > 300
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in stop_ids(tokenizer)
    assert load_policy_tokenizer("smollm2").chat_template == tokenizer.chat_template  # orchrm rl
    drawn = sample_groups(model, tokenizer, [ids], 2, 8, generator=torch.Generator().manual_seed(0))
    assert [s.tokens for s in drawn[0]] and all(0 < s.tokens <= 8 for s in drawn[0])


# --------------------------------------------------------------------------- the comparison

PIECES = r"</?\w+>|\n *| ?[A-Za-z]+| ?\d+| ?[^\sA-Za-z\d]+|\s+"
"""What the plan writer's tokenizer reads a text as: tags, line breaks with their indent,
words and numbers with their space, runs of punctuation, other whitespace."""
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WRITTEN = ("cot", "sc", "cot_reflexion", "sc_check")
"""The template plans the plan writer writes: two of one agent, two of two."""


def _word_tokenizer(texts: list[str]):
    """A tokenizer whose vocabulary is the pieces (`PIECES`) of `texts`, any other piece
    `<unk>`, with SmolLM2's special tokens and a ChatML chat template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    split = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PIECES), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    pieces = sorted({w for text in texts for w, _ in split.pre_tokenize_str(text)})
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]
    words = Tokenizer(models.WordLevel({w: i for i, w in enumerate(specials + pieces)}, "<unk>"))
    words.pre_tokenizer = split
    words.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=words,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        clean_up_tokenization_spaces=False,
        chat_template=CHATML,
    )


def _written(tokenizer) -> dict[str, list[int]]:
    """The plans of `WRITTEN` (`single_plan`) as the policy writes them."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return {
        s: tokenizer(to_harmony(single_plan(s)), add_special_tokens=False)["input_ids"] + [end]
        for s in WRITTEN
    }


@pytest.fixture(scope="module")
def plan_writer_dir(tmp_path_factory):
    """A tiny Llama that writes one of the template plans `WRITTEN`, any one alike, after
    any orchestrator prompt: every weight fit on them, with a tokenizer of the pieces of
    the prompt and of the templates' plans (~270 tokens), which a 2-layer model learns in
    a few seconds where SmolLM2's 49,152 tokens would take it minutes."""

    system = prompts.orchestrator("", "high")[0]["content"]
    drawn = [STRUCTURES[s](Choices(random.Random(k))) for s in STRUCTURES for k in range(8)]
    plans = [to_harmony(Orchestration(tuple(a), tuple(e), DoM.HIGH, "")) for a, e in drawn]
    texts = [f"system\n{system}\nuser\nTask:\nassistant\n", *THINKING.values(), *plans]
    tokenizer = _word_tokenizer(texts)
    tokenizer.padding_side = "left"
    model = _tiny_llama(tokenizer, hidden=64, positions=1024, pad_token_id=tokenizer.pad_token_id)
    rows = [(0, ids) for ids in _written(tokenizer).values()]
    questions = [t.task.question for t in make_tasks(MIX, 4, 9, "train")]
    steps = 160
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.0, steps)
    for step in range(steps):
        ids = prompt_ids(tokenizer, questions[step % len(questions)])
        sft_step(model, tokenizer, optimizer, scheduler, [ids], rows)
    path = tmp_path_factory.mktemp("plan-writer")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def one_agent_share(policy: str, adapter, question: str) -> float:
    """The probability that the policy with `adapter` writes a one-agent template plan
    for `question`, among the template plans."""
    model, tokenizer = load_pretrained(policy, adapter=adapter)
    plans = _written(tokenizer)
    rows = [(0, ids) for ids in plans.values()]
    with torch.no_grad():
        logp, _ = completion_logprobs(model, tokenizer, [prompt_ids(tokenizer, question)], rows)
    p = torch.softmax(logp.sum(-1), 0)
    one = torch.tensor([len(single_plan(s).agents) == 1 for s in plans])
    return float(p[one].sum())


def test_the_comparison_learns_at_a_tiny_size_and_reuses_its_stages(
    tmp_path, tmp_path_factory, plan_writer_dir
):
    # A one-agent plan (~55 tokens) fits in 80; a two-agent one is cut short, does not parse
    # and gets the penalty, below any valid plan's reward: both rewards ask for a one-agent
    # plan, which the plan writer chooses half the time. Its warm-up's data, every template
    # structure's plans, are not what it writes, so the warm-up takes one tiny step: the
    # stage runs and is reused, and GRPO starts from the plan writer.
    sizes = replace(
        QUICK,
        max_new_tokens=80,
        rm_steps=2,
        warmup_steps=1,
        steps=6,
        prompts_per_step=4,
        num_generations=8,
    )
    # The reward model on a tiny random decoder: an invalid plan's penalty is below any
    # valid plan's score whatever the backbone; MiniLM's training is tests/test_rm.py's.
    questions = [t.task.question for t in make_tasks(MIX, 4, 9, "train")]
    backbone = tiny_decoder(tmp_path_factory.mktemp("backbone") / "tiny", questions)
    settings = RLRealSettings(
        out=str(tmp_path),
        sizes=sizes,
        policy=plan_writer_dir,
        rm_backbone=str(backbone),
        lora_r=4,
        lora_alpha=8,
        warmup_lr=1e-5,
        lr=5e-3,
        progress=False,
    )
    split = draw_tasks(settings.real_exec(), say=lambda line: None)
    tasks = split["train"] + split["test"]
    server = LoopbackLLM(reply=stand_in_reply({t.task.question: t.task.answer for t in tasks}))

    @contextmanager
    def backend(s):
        yield lambda: OpenAIBackend(OpenAIConfig(base_url=server.base_url))

    lines: list[str] = []
    with server:
        report = run(settings, say=lines.append, backend=backend)
        calls = len(server.requests)
        again = run(settings, say=lines.append, backend=backend)
    assert calls > 0 and len(server.requests) == calls  # nothing executed twice
    assert any("warm-up: reused" in line for line in lines)
    assert any("grpo-orchrm: reused" in line for line in lines)
    assert any("grpo-execution: reused" in line for line in lines)
    assert set(report["methods"]) == {"warmup", "orchrm", "execution"}
    timeless = lambda r: {  # noqa: E731
        name: {k: v for k, v in m.items() if "seconds" not in k} for name, m in r.items()
    }
    assert timeless(report["methods"]) == timeless(again["methods"])
    assert again["curves"] == report["curves"]

    start = tmp_path / "warmup" / "adapter"
    before = one_agent_share(plan_writer_dir, start, tasks[0].task.question)
    assert 0.3 < before < 0.7
    for name in ("orchrm", "execution"):
        steps = report["curves"][name]
        assert [r["step"] for r in steps] == [1, 2, 3, 4, 5, 6]
        # valid and invalid samples: rewards spread, advantages are not 0, every step
        # updates the LoRA
        assert 0 < statistics.fmean(r["valid"] for r in steps) < 1
        assert all(r["computed"] > 0 and r["grad_norm"] > 0 for r in steps)
        adapter = tmp_path / f"grpo-{name}" / "adapter"
        moved = load_file(adapter / "adapter_model.safetensors")
        held = load_file(start / "adapter_model.safetensors")
        assert any(not torch.equal(held[k], moved[k]) for k in held)
        # the rewarded structure gained probability (from ~0.5 to over 0.9 here)
        after = one_agent_share(plan_writer_dir, adapter, tasks[0].task.question)
        assert after > before + 0.25, (name, before, after)
    assert report["methods"]["orchrm"]["training_tokens"]["rm"] > 0
    assert report["methods"]["execution"]["training_tokens"]["execution"] > 0
    saved = json.loads((tmp_path / "report.json").read_text())
    assert set(saved["pairs"]) == {"orchrm - execution", "execution / orchrm training tokens"}
    assert (tmp_path / "reward.png").stat().st_size > 0
    assert "| warmup |" in (tmp_path / "report.md").read_text()


def test_a_grpo_run_is_keyed_by_the_reward_model_it_reads(tmp_path):
    from orchrm.experiments.rl_real.train import Rewarder, _grpo_key

    (tmp_path / "warmup").mkdir()
    (tmp_path / "warmup" / "warmup.json").write_text(json.dumps({"key": {"steps": 1}}))
    model = tmp_path / "rm" / "model"
    model.mkdir(parents=True)
    settings = RLRealSettings(out=str(tmp_path), policy="p")
    rm, execution = Rewarder("execution", -1.0), Rewarder("execution", -1.0)
    rm.method = "orchrm"  # the key only reads the method and the penalty
    (model / "orchrm.json").write_text(json.dumps({"steps": 150}))
    first = _grpo_key(settings, rm), _grpo_key(settings, execution)
    (model / "orchrm.json").write_text(json.dumps({"steps": 300}))  # trained again
    second = _grpo_key(settings, rm), _grpo_key(settings, execution)
    assert first[0] != second[0] and first[1] == second[1] and "rm" not in first[1]
