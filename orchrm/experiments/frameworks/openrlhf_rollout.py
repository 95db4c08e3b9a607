"""A reward server driven by OpenRLHF's own remote-reward client, as a rollout drives it.

OpenRLHF's `SingleTurnAgentExecutor` (`openrlhf.utils.agent`, what
`--reward.remote_url` runs) tokenizes each sample's prompt, asks a vLLM engine for the
response's token ids, decodes prompt + response with the policy's tokenizer and posts that
one sample to the reward server, retrying an error 5 times. `rollout` runs it on every
sample at once; the one part imitated is the vLLM engine (`ScriptedEngine`, which answers
with the token ids of a given plan, as a policy would). `chatml_tokenizer` makes a policy
tokenizer with a ChatML template, and `Posts` counts every HTTP attempt aiohttp makes.

OpenRLHF, aiohttp, tokenizers and transformers are imported inside the functions that use
them, so importing this module needs none of them.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from types import SimpleNamespace

from orchrm.runtime.prompts import orchestrator

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""The ChatML chat template."""


def chatml_tokenizer(plans: list[tuple[str, str]]):
    """An orchestrator's tokenizer: byte-level BPE (decoding gives back the exact text)
    with ChatML special tokens and template, trained on the orchestrator prompt and the
    (question, plan) pairs `plans`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    system, _ = orchestrator(plans[0][0], "high")
    bpe.train_from_iterator([system["content"], *(q + "\n" + p for q, p in plans)], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
        chat_template=CHATML,
    )


class ScriptedEngine:
    """The vLLM engine's `generate` as `SingleTurnAgentExecutor` calls it: the token ids
    of one scripted response, released for every sample at once (`gate`) so that their
    reward requests leave together, as a rollout's do."""

    def __init__(self, token_ids: list[int], gate: asyncio.Barrier | None = None):
        self.token_ids, self.gate = token_ids, gate

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        if len(self.token_ids) > sampling_params.max_tokens:
            raise ValueError(
                f"{len(self.token_ids)} scripted tokens, over max_tokens "
                f"{sampling_params.max_tokens}"
            )
        if self.gate is not None:
            await self.gate.wait()
        output = SimpleNamespace(token_ids=self.token_ids, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


@dataclasses.dataclass(frozen=True)
class Sample:
    """One rollout sample: the prompt OpenRLHF's dataset gives (chat template applied)
    and the plan the policy writes (then its end-of-turn token)."""

    question: str
    prompt: str
    plan: str
    cut: int = 0
    """Prompt tokens OpenRLHF drops from the left (its prompt exceeds its budget)."""


def sample(tokenizer, question: str, plan: str, cut: int = 0) -> Sample:
    """The sample of `plan` written for `question`: the orchestrator prompt of the
    question under the tokenizer's chat template, ready for the assistant's turn."""
    system, user = orchestrator(question, "high")
    prompt = tokenizer.apply_chat_template(
        [system, user], tokenize=False, add_generation_prompt=True
    )
    return Sample(question, prompt, plan, cut)


class Posts:
    """Every HTTP request aiohttp sends inside `with Posts() as posts:`: its outcome (the
    status, or `error` for a connection that failed) and the most in flight at once."""

    def __init__(self) -> None:
        self.statuses: collections.Counter[int | str] = collections.Counter()
        self.in_flight = self.peak = 0

    def __enter__(self) -> Posts:
        import aiohttp

        self._send = send = aiohttp.ClientSession._request

        async def counted(session, *args, **kwargs):
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                response = await send(session, *args, **kwargs)
            except Exception:
                self.statuses["error"] += 1
                raise
            finally:
                self.in_flight -= 1
            self.statuses[response.status] += 1
            return response

        aiohttp.ClientSession._request = counted
        return self

    def __exit__(self, *exc) -> None:
        import aiohttp

        aiohttp.ClientSession._request = self._send


def rollout(samples: list[Sample], tokenizer, url: str) -> list[dict]:
    """Each sample through `SingleTurnAgentExecutor.execute` against the reward server at
    `url`, all at once, one reward request each, as OpenRLHF's rollout runs them; the
    executor's outputs in the samples' order."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(url)

    async def run() -> list[dict]:
        gate = asyncio.Barrier(len(samples))

        async def one(s: Sample) -> dict:
            prompt = tokenizer(text=s.prompt, add_special_tokens=False)["input_ids"]
            written = s.plan + tokenizer.eos_token
            response = tokenizer(text=written, add_special_tokens=False)["input_ids"]
            params = SimpleNamespace(max_tokens=len(response), logprobs=None)
            max_length = len(prompt) - s.cut + len(response)
            engine = ScriptedEngine(response, gate)
            return await executor.execute(s.prompt, None, params, max_length, tokenizer, engine)

        return await asyncio.gather(*(one(s) for s in samples))

    return asyncio.run(run())
