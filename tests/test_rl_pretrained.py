"""The pretrained policy (`orchrm.rl.pretrained`): shared-prompt sampling and
log-probabilities against transformers' own, GRPO's update, the bundled SmolLM2 with a
LoRA and the orchestrator prompt, and the GRPO comparison (`orchrm.experiments.rl_real`)
at a tiny size, executing on the loopback stand-in of an OpenAI-compatible server.

The tiny policy is a randomly initialized 2-layer Llama with SmolLM2's tokenizer,
seeded, in fp32."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace
from functools import cache

import pytest
import torch

from orchrm.experiments.real_exec import MIX
from orchrm.experiments.rl_real import QUICK, RLRealSettings, run
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
    stop_ids,
)
from orchrm.runtime.local_llm import bundled_gguf
from orchrm.runtime.openai_backend import OpenAIBackend, OpenAIConfig
from orchrm.tasks.benchmarks.generated import make_tasks
from tests.loopback_llm import LoopbackLLM
from tests.test_real_exec import stand_in_reply


@cache
def _tokenizer():
    from transformers import AutoTokenizer

    gguf = bundled_gguf()
    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A saved tiny Llama policy with SmolLM2's tokenizer (a causal-LM directory)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = _tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    path = tmp_path_factory.mktemp("tiny-policy")
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(path)
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


def test_the_comparison_runs_at_a_tiny_size_and_reuses_its_stages(tmp_path, tiny_dir):
    sizes = replace(QUICK, max_new_tokens=24, warmup_steps=2)
    settings = RLRealSettings(
        out=str(tmp_path), sizes=sizes, policy=tiny_dir, lora_r=4, progress=False
    )
    tasks = make_tasks(MIX, sizes.train_tasks, 0, "train") + make_tasks(
        MIX, sizes.test_tasks, 1, "test"
    )
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
    assert set(report["methods"]) == {"warmup", "orchrm", "execution"}
    timeless = lambda r: {  # noqa: E731
        name: {k: v for k, v in m.items() if "seconds" not in k} for name, m in r.items()
    }
    assert timeless(report["methods"]) == timeless(again["methods"])
    for name in ("orchrm", "execution"):
        steps = report["curves"][name]
        assert [r["step"] for r in steps] == [1, 2]
        assert all(r["policy"] > 0 for r in steps)
    # a tiny random policy writes nothing valid: every sample gets the penalty
    assert report["methods"]["orchrm"]["training_tokens"]["rm"] == 0
    assert all(r["reward"] == -1.0 for r in report["curves"]["execution"])
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["pairs"]["orchrm - execution"]["difference"] == 0.0
    assert (tmp_path / "reward.png").stat().st_size > 0
    assert "| warmup |" in (tmp_path / "report.md").read_text()
