"""Not a benchmark: the verl reward batch and the OpenRLHF rollout storm that
`framework_clients.py` measures and tests/test_frameworks_verl.py and
tests/test_frameworks_openrlhf.py hold to their figures, built the same way for both.

verl: rows of a math batch (plans of the world's two orchestrators, some broken off),
SmolLM2-135M-Instruct's tokenizer as the policy's, verl's own `ppo_trainer.yaml` composed
with the overrides docs/rl.md gives, `DataProto` rows as verl's rollout leaves them, and
verl's `RewardLoopWorker` run on them from a chosen number of executor threads.

OpenRLHF: the world's plans, a byte-level BPE policy tokenizer with ChatML, OpenRLHF's
`SingleTurnAgentExecutor` run on every sample at once against a vLLM engine stand-in
(`ScriptedEngine`, the one imitation: no vLLM runs here), `orchrm serve` in its own
process, and a count of every HTTP attempt aiohttp makes (`Posts`).

verl and OpenRLHF are imported inside the functions that use them, so importing this
module needs neither.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import http.client
import os
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import torch

from orchrm.rl import verl_reward
from orchrm.rl.policy import policy_prompt
from orchrm.rl.rewards import runnable
from orchrm.runtime.local_llm import bundled_gguf
from orchrm.runtime.prompts import orchestrator
from orchrm.scoring.local import OrchRM
from orchrm.world.orchestrators import orchestrators
from orchrm.world.tasks import generate_tasks

ORCHRM = Path(sys.executable).with_name("orchrm")
BROKEN = "<thinking>half a plan</thinking>\n<agent>\n  <agent_id>A</agent_id>"
"""An orchestrator output cut off mid-plan: it does not parse."""
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def get(port: int, path: str) -> tuple[int, str]:
    """(status, body text) of a GET on the loopback."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


# ---- verl ----------------------------------------------------------------------------


def verl_rows(samples: int) -> list:
    """(task, orchestrator output) for each sample: plans of the world's two
    orchestrators over 16 tasks, with every 16th output broken off mid-plan."""
    tasks = generate_tasks("math", 16, seed=5)
    writers = orchestrators(5)
    out = []
    for n in range(samples):
        task = tasks[n % len(tasks)]
        text, _ = writers[("base", "specialized")[n % 2]].write(task, n // 32)
        out.append((task, BROKEN if n % 16 == 7 else text))
    return out


def smollm2_tokenizer(folder: Path):
    """SmolLM2-135M-Instruct's tokenizer, saved as a model directory verl can load."""
    from transformers import AutoTokenizer

    gguf = bundled_gguf()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer.save_pretrained(folder)
    return folder, tokenizer


def one_at_a_time(rm_dir: Path, rows) -> list[float]:
    """Each row's reward from the model scored here one response at a time, in fp32."""
    rm = OrchRM.load(rm_dir, device="cpu", dtype="fp32")
    out = []
    for task, text in rows:
        plan = runnable(text)
        if plan is None:
            out.append(verl_reward.DEFAULT_PENALTY)
            continue
        (scored,) = rm.score_texts([rm.render(task.question, plan)])
        out.append(rm.info.normalize([scored.score])[0])
    return out


def verl_config(policy: Path, **reward_kwargs):
    """verl's trainer configuration with the overrides docs/rl.md gives."""
    import verl
    from hydra import compose, initialize_config_dir

    overrides = [
        f"actor_rollout_ref.model.path={policy}",
        "reward.custom_reward_function.path=pkg://orchrm.rl.verl_reward",
        "reward.custom_reward_function.name=compute_score",
    ]
    overrides += [
        f"+reward.custom_reward_function.reward_kwargs.{k}={v}" for k, v in reward_kwargs.items()
    ]
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose("ppo_trainer", overrides)


def data_proto(rows, tokenizer):
    """A verl batch of the rows: left-padded prompts, right-padded responses."""
    import numpy as np
    from verl import DataProto

    prompts = [
        tokenizer(policy_prompt(t.question), add_special_tokens=False)["input_ids"] for t, _ in rows
    ]
    responses = [tokenizer(text, add_special_tokens=False)["input_ids"] for _, text in rows]
    width_p, width_r = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id or 0
    prompt_ids = torch.full((len(rows), width_p), pad)
    response_ids = torch.full((len(rows), width_r), pad)
    mask = torch.zeros((len(rows), width_p + width_r), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        prompt_ids[i, width_p - len(p) :] = torch.tensor(p)
        response_ids[i, : len(r)] = torch.tensor(r)
        mask[i, width_p - len(p) : width_p + len(r)] = 1
    objects = lambda values: np.array(values, dtype=object)  # noqa: E731
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_ids,
            "responses": response_ids,
            "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
            "attention_mask": mask,
        },
        non_tensors={
            "data_source": objects(["orchrm/math"] * len(rows)),
            "reward_model": objects([{"ground_truth": t.answer} for t, _ in rows]),
            "extra_info": objects(
                [{"question": t.question, "index": i} for i, (t, _) in enumerate(rows)]
            ),
        },
    )


def run_reward_loop(config, data, threads: int) -> list[dict]:
    """verl's reward loop worker over the batch, from `threads` executor threads (asyncio's
    default on a node of `threads` - 4 cores or more, up to 32)."""
    from verl.experimental.reward_loop import RewardLoopWorker

    worker = RewardLoopWorker(config)
    loop = worker.loop
    loop.set_default_executor(ThreadPoolExecutor(threads))
    return loop.run_until_complete(worker.compute_score_batch(data))


# ---- OpenRLHF ------------------------------------------------------------------------


def world_plans() -> list[tuple[str, str]]:
    """(question, harmony text) the world's orchestrators wrote."""
    out = []
    for task in generate_tasks("math", 8, seed=1):
        for writer in orchestrators(0).values():
            for sample in range(2):
                out.append((task.question, writer.write(task, sample)[0]))
    return out


def chatml_tokenizer(plans):
    """The orchestrator's tokenizer: byte-level BPE (decoding gives back the exact text)
    with ChatML special tokens and template, trained on the prompts and plans."""
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
        assert len(self.token_ids) <= sampling_params.max_tokens
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
    """Each sample through `SingleTurnAgentExecutor.execute`, all at once, one reward
    request each, as OpenRLHF's rollout runs them."""
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


@contextlib.contextmanager
def serve_process(model: Path, log: Path, *options: str):
    """`orchrm serve` in its own process on a free loopback port (fp32, every limit at
    its default unless `options` set it), once /healthz answers; yields (process, port).
    Stopped at the end (SIGTERM, then killed after 60 s) if it is still running."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [str(ORCHRM)] if ORCHRM.exists() else [sys.executable, "-m", "orchrm"]
    args = ["serve", "--rm", str(model), "--port", str(port), "--dtype", "fp32", *options]
    env = {k: v for k, v in os.environ.items() if k != "ORCHRM_API_KEY"}
    with log.open("w") as out:
        process = subprocess.Popen([*command, *args], stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            try:
                if get(port, "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        yield process, port
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def orchrm_serve(model: Path, log: Path, *options: str):
    """`serve_process`, yielding its port."""
    with serve_process(model, log, *options) as (_, port):
        yield port


def counts(metrics: str, name: str, key: str, where: str = "") -> dict[str, int]:
    """The Prometheus counter `name` from /metrics text, by its label `key`, over the
    lines that hold `where` (a label and its value, `route="/get_reward"`)."""
    out: dict[str, int] = collections.Counter()
    for line in metrics.splitlines():
        if line.startswith(name + "{") and where in line:
            label = re.search(rf'{key}="([^"]*)"', line).group(1)
            out[label] += int(float(line.rsplit(" ", 1)[1]))
    return dict(out)
