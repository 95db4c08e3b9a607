"""The orchestration model: types, graph validation and the two renderings.

An orchestration is the plan an orchestrator LLM writes for one task: sub-agents
(chain-of-thought, self-consistency, debate, reflexion, web search) wired into a
directed graph whose single sink produces the final answer. Everything downstream of
`orchrm.parse` sees the `Orchestration` type defined here.

- `agent_types`: `AGENT_REGISTRY`, one entry per sub-agent type with its name, words,
  roles, calls and colours, which every per-type table reads;
- `model`: `Orchestration`, `Agent`, `Edge`, `DoM`, and `${id}` references;
- `validation`: `validate`, every rule a graph breaks;
- `harmony_xml`: the harmony tag scanner and `to_harmony(o)`, the XML an orchestrator
  writes (`parse_harmony` reads it back to an equal object);
- `rm_text`: `render_for_rm(question, o)`, the one text the reward model reads, in
  training, scoring, serving and GRPO alike. Its layout is versioned by
  `RM_RENDER_VERSION`, which reward-model checkpoints record and check at load time;
- `edits`: `EDITS`, the kinds of edit that keep a plan valid (retype, add a checker,
  insert a step, remove, split, merge), and `neighbours(o)`, every plan one edit away.

Import the names from `orchrm.orchestration`; the submodules are its layout.
"""

from orchrm.orchestration.agent_types import (
    AGENT_REGISTRY,
    AGENT_TYPES,
    AgentType,
    CallStep,
    require_every_type,
)
from orchrm.orchestration.edits import EDITS, Edit, neighbours
from orchrm.orchestration.harmony_xml import FINAL_MARKERS, HARMONY_TAGS, harmony_tags, to_harmony
from orchrm.orchestration.model import (
    ID_PATTERN,
    LOW_DOM_DEFAULT_ID,
    ORCHRM_JSON_FORMAT,
    Agent,
    DoM,
    Edge,
    Orchestration,
    reference_spans,
    replace_references,
)
from orchrm.orchestration.rm_text import (
    QUESTION_SHARE,
    RM_RENDER_VERSION,
    TYPE_NAMES,
    OffsetTokenCounter,
    TokenCounter,
    approx_token_count,
    render_for_rm,
    replace_surrogates,
    rm_completion,
    rm_prompt,
)
from orchrm.orchestration.validation import Rule, Violation, validate

__all__ = [
    "AGENT_REGISTRY",
    "AGENT_TYPES",
    "EDITS",
    "FINAL_MARKERS",
    "HARMONY_TAGS",
    "ID_PATTERN",
    "LOW_DOM_DEFAULT_ID",
    "ORCHRM_JSON_FORMAT",
    "QUESTION_SHARE",
    "RM_RENDER_VERSION",
    "TYPE_NAMES",
    "Agent",
    "AgentType",
    "CallStep",
    "DoM",
    "Edge",
    "Edit",
    "OffsetTokenCounter",
    "Orchestration",
    "Rule",
    "TokenCounter",
    "Violation",
    "approx_token_count",
    "harmony_tags",
    "neighbours",
    "reference_spans",
    "render_for_rm",
    "replace_references",
    "replace_surrogates",
    "require_every_type",
    "rm_completion",
    "rm_prompt",
    "to_harmony",
    "validate",
]
