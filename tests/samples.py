"""Shared test data and builders: sample orchestrations, candidate sets, tiny models.

Not a test module: test modules import from here (never from each other).
"""

from __future__ import annotations

from pathlib import Path

from orchrm.orchestration import Agent, DoM, Orchestration
from orchrm.selection.selectors import Candidate, CandidateSet

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mas_orchestra"

LOW_DOM = """<thinking> A near tie: debate it. </thinking>
<agent>
  <agent_name>DebateAgent</agent_name>
  <agent_description>Near-tie numeric choice using one Debate call.</agent_description>
  <required_arguments>
    <agent_input></agent_input>
    <debate_roles>["Geometry Theorist", "Trigonometry Specialist"]</debate_roles>
  </required_arguments>
  <agent_output_id>geo_out</agent_output_id>
</agent>
<answer>geo_out</answer>
"""

HIGH_DOM = """<thinking>Extract, then solve.</thinking>
<agent>
  <agent_id>Parse</agent_id>
  <agent_name>CoTAgent</agent_name>
  <agent_description>Extract the equations.</agent_description>
  <required_arguments><agent_input></agent_input></required_arguments>
</agent>
<agent>
  <agent_id>Solve</agent_id>
  <agent_name>SCAgent</agent_name>
  <agent_description>Solve them.</agent_description>
  <required_arguments><agent_input>Solve: ${Parse}</agent_input></required_arguments>
</agent>
<edge>
  <from>Parse</from><to>Solve</to>
</edge>
"""

GRAPH_CODE = '''async def forward(self, original_task_info):
    """Generated harmony agent forward function - multi-agent graph (async)"""
    import re
    agents_config = [
        {"agent_id": "Parse", "agent_name": "CoTAgent", "agent_description": "Extract.",
         "required_arguments": {"agent_input": ""}},
        {"agent_id": "Judge", "agent_name": "DebateAgent", "agent_description": "Decide.",
         "required_arguments": {"agent_input": "Decide from ${Parse}",
                                "debate_roles": ["Skeptic", "Solver"]}},
    ]
    edges = [["Parse", "Judge"]]
    execution_order = ["Parse", "Judge"]
    sink_agents = ["Judge"]
    agent_results = {}
    return agent_results[sink_agents[0]]
'''

LOW_CODE = '''async def forward(self, original_task_info):
    """Generated harmony agent forward function"""
    agent_name = """ReflexionAgent"""
    agent_description = """Answer, critique, refine."""
    agent_output_id = """refl_out"""
    agent_calls = [{'name': 'ReflexionAgent', 'required_arguments': {'agent_input': ''}}]
    return None
'''


def plan(agent_type: str) -> Orchestration:
    """A one-agent high-DoM orchestration of `agent_type`."""
    return Orchestration(agents=(Agent("A", agent_type),), dom=DoM.HIGH)


def candidate_set(answers, correct, tokens=100, logprobs=None, ps=None) -> CandidateSet:
    """Candidates of task "t" with these answers and correctness (and tokens, logprobs,
    true success probabilities), cycling through the sub-agent types."""
    types = ["CoTAgent", "SCAgent", "ReflexionAgent", "DebateAgent", "WebSearchAgent"]
    return CandidateSet(
        "t",
        "What is 6 x 7?",
        tuple(
            Candidate(
                plan(types[i % 5]), a, c, tokens, (logprobs or [None] * 9)[i], (ps or [None] * 9)[i]
            )
            for i, (a, c) in enumerate(zip(answers, correct, strict=True))
        ),
    )


def tiny_decoder(folder: Path, texts: list[str]) -> Path:
    """A small random Llama reward model with a word-level tokenizer that has no pad
    token (as decoder tokenizers often lack one)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForSequenceClassification, PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel(unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["<unk>", "</s>"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>", eos_token="</s>")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        num_labels=1,
    )
    LlamaForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_gguf(path: Path, architecture: str, rows: int) -> Path:
    """A GGUF file of `architecture` with one block and a zero embedding of `rows` x 8;
    skips the test without the gguf package."""
    import numpy as np
    import pytest

    gguf = pytest.importorskip("gguf", reason="writing a GGUF file needs the gguf package")
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((rows, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tiny_training():
    """A model, optimizer and scheduler small enough to checkpoint in milliseconds."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    return model, optimizer, get_linear_schedule_with_warmup(optimizer, 1, 10)


def train_and_save(out: Path, steps: list[int], keep: int = 10) -> dict:
    """One optimizer step before each save; the weights each checkpoint holds."""
    import torch

    from orchrm.training.checkpoint import TrainState, save_checkpoint

    model, optimizer, scheduler = tiny_training()
    saved = {}
    for step in steps:
        model(torch.ones(2, 4)).sum().backward()
        optimizer.step()
        scheduler.step()
        save_checkpoint(out, model, optimizer, scheduler, state=TrainState(step=step), keep=keep)
        saved[step] = model.weight.detach().clone()
    return saved


def world_math_pairs(folder: Path) -> tuple[Path, Path, list[dict]]:
    """World math logs (24 tasks x 4 samples, seed 3) ingested, mined and exported under
    `folder`, and a tiny decoder whose tokenizer knows their words: (the exported pairs,
    the backbone, the records)."""
    from orchrm.jsonl import write_jsonl
    from orchrm.store.db import Store
    from orchrm.store.ingest import ingest_file
    from orchrm.store.pairs import MineConfig, export, mine
    from orchrm.world.generate import generate

    records = generate("math", 24, 4, seed=3, progress=False).records
    write_jsonl(records, folder / "math.jsonl")
    with Store(folder / "s.duckdb") as store:
        ingest_file(store, folder / "math.jsonl")
        mine(store, MineConfig(specialized=("specialized",), base=("base",), cap_per_task=4))
        export(store, folder / "export")
    backbone = tiny_decoder(folder / "backbone", [r["question"] + " " + r["raw"] for r in records])
    return folder / "export", backbone, records


def tiny_train_config(pairs: Path, out: Path, backbone: Path, **extra):
    """A `TrainConfig` of 4 fp32 steps of 8 pairs at 128 tokens on 2 threads, validated
    every 2 steps; `extra` sets any other field."""
    from orchrm.training.config import TrainConfig

    return TrainConfig(
        pairs=str(pairs),
        out=str(out),
        backbone=str(backbone),
        max_steps=4,
        eval_every=2,
        batch_size=8,
        max_length=128,
        dtype="fp32",
        num_threads=2,
        **extra,
    )
