"""orchrm.rl: the offline policy, the reward functions and their token accounting, GRPO,
RFT and DPO steps through TRL, held-out evaluation, the verl reward, the CLI."""

from __future__ import annotations

import ast
import json
import math
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

from orchrm.cli import app
from orchrm.errors import ConfigError, InputError
from orchrm.experiments.rl_world.config import RLExperimentConfig
from orchrm.experiments.rl_world.data import prompt_rows
from orchrm.experiments.rl_world.evaluate import PolicyEval, curve_callback, evaluate_policy
from orchrm.orchestration import render_for_rm, to_harmony
from orchrm.rl import verl_reward
from orchrm.rl.config import DPOConfig, GRPOConfig, PolicyConfig, RFTConfig, TinyPolicyConfig
from orchrm.rl.policy import (
    load_policy,
    new_policy,
    policy_prompt,
    sample,
    save_policy,
    sft,
    train_tokenizer,
)
from orchrm.rl.rewards import ExecutionReward, OrchRMReward, TokenLedger, runnable
from orchrm.rmodel.files import METADATA
from orchrm.scoring.local import OrchRM
from orchrm.world.backend import WorldBackend
from orchrm.world.generate import world_config
from orchrm.world.orchestrators import orchestrators
from orchrm.world.tasks import generate_tasks
from orchrm.world.templates import single_plan
from tests.samples import tiny_decoder

TINY = TinyPolicyConfig(n_layer=1, n_embd=64, n_head=2, n_positions=256, sft_steps=300)
BROKEN = "<thinking>half a plan</thinking>\n<agent>\n  <agent_id>A</agent_id>"
DANGLING = (
    "<agent><agent_id>A</agent_id><agent_name>CoTAgent</agent_name><agent_description>x"
    "</agent_description><required_arguments><agent_input></agent_input>"
    "</required_arguments></agent>\n<edge><from>Ghost</from><to>A</to></edge>"
)


def _params(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


@pytest.fixture(scope="module")
def world():
    tasks = generate_tasks("math", 8, seed=5)
    base = orchestrators(5)["base"]
    examples = [(policy_prompt(t.question), base.write(t, s)[0]) for t in tasks for s in range(2)]
    return tasks, examples


@pytest.fixture(scope="module")
def policy_dir(world, tmp_path_factory) -> Path:
    """A tiny policy fine-tuned on 16 base-orchestrator outputs (as the default one is
    built, smaller)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _, examples = world
        tokenizer = train_tokenizer([p for p, _ in examples] + [c for _, c in examples], 2048)
        torch.manual_seed(0)
        model = new_policy(tokenizer, TINY)
        result = sft(model, tokenizer, examples, TINY.sft_steps, 16, 3e-3, progress=False)
    finally:
        torch.set_num_threads(threads)
    assert result["losses"][-1] < result["losses"][0] / 5
    return save_policy(model, tokenizer, tmp_path_factory.mktemp("policy") / "p")


@pytest.fixture(scope="module")
def rm_dir(world, tmp_path_factory) -> Path:
    """A tiny random decoder reward model with orchrm metadata."""
    tasks, examples = world
    folder = tmp_path_factory.mktemp("rm") / "rm"
    texts = [render_for_rm(t.question, o) for t in tasks for _, c in examples if (o := runnable(c))]
    tiny_decoder(folder, texts)
    (folder / METADATA).write_text(
        json.dumps({"max_length": 128, "reward_mean": 0.5, "reward_std": 2.0})
    )
    return folder


def test_sft_policy_writes_parseable_orchestrations_and_reloads(policy_dir, world):
    tasks, _ = world
    model, tokenizer = load_policy(policy_dir)
    drawn = sample(model, tokenizer, [policy_prompt(t.question) for t in tasks], 4, 96, seed=1)
    texts = [d.text for group in drawn for d in group]
    assert sum(runnable(t) is not None for t in texts) / len(texts) >= 0.5
    assert all(0 < d.tokens <= 96 for group in drawn for d in group)


def test_tokenizer_round_trips_text_it_never_saw(world):
    _, examples = world
    tokenizer = train_tokenizer([c for _, c in examples], 300)
    text = "<agent_id>Zeta_9</agent_id> ünïcode ${X} \n\t done"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_orchrm_reward_scores_valid_plans_and_penalizes_the_rest(rm_dir, world):
    tasks, examples = world
    rm = OrchRM.load(rm_dir, device="cpu")
    ledger = TokenLedger()
    reward = OrchRMReward(rm, penalty=-7.0, ledger=ledger)
    valid = next(c for _, c in examples if runnable(c))
    completions = [valid, BROKEN, DANGLING, valid]
    question = [tasks[0].question] * 4
    out = reward(
        [""] * 4, completions, completion_ids=[[1] * 5, [1] * 3, [1], [1] * 2], question=question
    )
    (scored,) = rm.score_texts([rm.render(question[0], runnable(valid))])
    expected = rm.info.normalize([scored.score])[0]
    assert out[1] == out[2] == -7.0
    assert out[0] == pytest.approx(expected, abs=1e-5) and out[3] == out[0]
    row = ledger.rows[-1]
    one = len(rm.tokenizer(rm.render(question[0], runnable(valid)))["input_ids"])
    # The cached duplicate still counts: tokens are what scoring every request costs.
    assert row["rm"] == 2 * one and row["policy"] == 11 and row["execution"] == 0
    assert row["valid"] == 0.5 and ledger.totals["rm"] == 2 * one
    # A chat model's completions arrive as messages (conversational prompts).
    chat = reward([[]], [[{"role": "assistant", "content": valid}]], question=question[:1])
    assert chat == [out[0]]


def test_the_centred_reward_is_the_sigmoid_of_the_gap_to_the_reference_plans(rm_dir, world):
    tasks, examples = world
    rm = OrchRM.load(rm_dir, device="cpu")
    plans = list(dict.fromkeys(c for _, c in examples if runnable(c)))[:3]
    q = tasks[0].question
    value = {p: rm.info.normalize([s.score])[0] for p, s in zip(plans, rm.score_texts(
        [rm.render(q, runnable(p)) for p in plans]), strict=True)}  # fmt: skip
    ledger = TokenLedger()
    reward = OrchRMReward(rm, penalty=-7.0, ledger=ledger, centre=True)
    reference = [plans[1], BROKEN, plans[2]]  # the broken one is left out of the mean
    out = reward([""] * 2, [plans[0], BROKEN], question=[q, q], reference=[reference] * 2)
    centre = (value[plans[1]] + value[plans[2]]) / 2
    assert out[0] == pytest.approx(1 / (1 + math.exp(centre - value[plans[0]])), abs=1e-6)
    assert 0 < out[0] < 1 and out[1] == -7.0
    # The references of a question are scored and counted once, then read from the cache.
    tokens = lambda p: len(rm.tokenizer(rm.render(q, runnable(p)))["input_ids"])  # noqa: E731
    first = ledger.rows[-1]["rm"]
    assert first == tokens(plans[0]) + tokens(plans[1]) + tokens(plans[2])
    assert reward([""], [plans[0]], question=[q], reference=[reference]) == [out[0]]
    assert ledger.rows[-1]["rm"] == tokens(plans[0])
    # A plan level with its references earns one half, whatever the model scores both.
    level = OrchRMReward(rm, centre=True)([""], [plans[1]], question=[q], reference=[[plans[1]]])
    assert level == [0.5]
    # The cache is keyed by the references too: other references, another centre.
    other = reward([""], [plans[0]], question=[q], reference=[[plans[1]]])
    assert other == [pytest.approx(1 / (1 + math.exp(value[plans[1]] - value[plans[0]])))]
    with pytest.raises(InputError, match="`reference` column"):
        OrchRMReward(rm, centre=True)([""], [plans[0]], question=[q])
    with pytest.raises(InputError, match=r"row 0 .* none of its 1 reference plans parses"):
        OrchRMReward(rm, centre=True)([""], [plans[0]], question=[q], reference=[[BROKEN]])


def test_the_diversity_bonus_pays_a_structure_the_rest_of_its_group_does_not_write(rm_dir):
    from orchrm.rl.rewards import diversity_bonus, structure

    cot, sc = to_harmony(single_plan("cot")), to_harmony(single_plan("sc"))
    renamed = cot.replace("<agent_id>", "<agent_id>X")  # other ids, the same structure
    assert renamed != cot
    assert structure(runnable(renamed)) == structure(runnable(cot)) != structure(runnable(sc))
    # group "a": cot twice, sc once, one broken plan; group "b": a single sample
    texts = [cot, renamed, sc, BROKEN, sc]
    question = ["a", "a", "a", "a", "b"]
    bonus = diversity_bonus(question, [runnable(t) for t in texts], 0.6)
    assert bonus == pytest.approx([0.6 * 2 / 3, 0.6 * 2 / 3, 0.6, 0.0, 0.0])
    assert diversity_bonus(question, [runnable(t) for t in texts], 0.0) == [0.0] * 5
    # in the reward: the model's normalized score plus the bonus; the penalty unchanged
    rm = OrchRM.load(rm_dir, device="cpu")
    plain = OrchRMReward(rm, penalty=-7.0)([""] * 5, texts, question=question)
    diverse = OrchRMReward(rm, penalty=-7.0, diversity=0.6)([""] * 5, texts, question=question)
    assert [d - p for d, p in zip(diverse, plain, strict=True)] == pytest.approx(bonus)
    assert diverse[3] == -7.0
    with pytest.raises(ConfigError, match="diversity -1"):
        OrchRMReward(rm, diversity=-1)


def test_grpo_on_your_tasks_rewards_with_every_reward_setting(
    policy_dir, rm_dir, world, tmp_path, monkeypatch
):
    """`orchrm rl --tasks` builds its reward from the GRPO settings as the world run does
    (`OrchRMReward.for_grpo`): the diversity bonus, the penalty and the normalization."""
    import orchrm.rl.grpo
    from orchrm.experiments.rl_world.pipeline import grpo_on_tasks

    class Handed(Exception):
        pass

    def train_grpo(policy, grpo, reward, rows, out):
        raise Handed(reward)

    monkeypatch.setattr(orchrm.rl.grpo, "train_grpo", train_grpo)
    tasks, _ = world
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps({"question": t.question}) + "\n" for t in tasks))
    grpo = GRPOConfig(diversity=0.25, penalty=-5.0, normalize_rm=False)
    config = RLExperimentConfig(
        out=str(tmp_path / "out"), tasks=str(task_file), rm=str(rm_dir), grpo=grpo,
        policy=PolicyConfig(model=str(policy_dir)),
    )  # fmt: skip
    with pytest.raises(Handed) as handed:
        grpo_on_tasks(config, say=lambda line: None)
    (reward,) = handed.value.args
    assert (reward.diversity, reward.penalty, reward.normalize, reward.centre) == (
        0.25,
        -5.0,
        False,
        False,
    )


def test_execution_reward_runs_plans_and_counts_sub_agent_tokens(world):
    tasks, examples = world
    config = world_config()
    ledger = TokenLedger()
    reward = ExecutionReward(WorldBackend(tasks, 5, None, config), config, -1.0, ledger)
    plan = next(c for _, c in examples if runnable(c))
    t = tasks[0]
    rows = prompt_rows([t] * 4)
    completions = [f"<answer>{t.answer}</answer>", "<answer>-1</answer>", BROKEN, plan]
    out = reward(
        [r["prompt"] for r in rows],
        completions,
        **{k: [r[k] for r in rows] for k in ("question", "task_id", "answer", "domain")},
    )
    assert out[:3] == [1.0, 0.0, -1.0] and out[3] in (0.0, 1.0)
    assert ledger.rows[-1]["execution"] > 0 and ledger.rows[-1]["rm"] == 0


def test_chat_prompt_rows_carry_the_full_orchestrator_prompt(world):
    tasks, _ = world
    row = prompt_rows(tasks[:1], chat=True)[0]
    assert (
        row["prompt"][0]["role"] == "system" and tasks[0].question in row["prompt"][-1]["content"]
    )
    assert row["answer"] == tasks[0].answer and row["task_id"] == tasks[0].id


def test_ledger_writes_every_row(tmp_path):
    ledger = TokenLedger(tmp_path / "tokens.jsonl")
    ledger.add(0, policy=10, rm=5, reward=0.5)
    ledger.add(1, policy=3, execution=100)
    rows = [json.loads(x) for x in (tmp_path / "tokens.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    assert rows[-1]["total"] == {"policy": 13, "rm": 5, "execution": 100}
    assert ledger.total == 118


def _policy(policy_dir: Path, **kw) -> PolicyConfig:
    """Two quiet steps from the tiny policy, short samples."""
    return PolicyConfig(
        model=str(policy_dir), steps=2, max_completion_length=64, progress=False, **kw
    )


def test_grpo_steps_through_trl_move_the_weights(policy_dir, rm_dir, world, tmp_path):
    from orchrm.rl.grpo import train_grpo

    tasks, _ = world
    ledger = TokenLedger()
    reward = OrchRMReward(OrchRM.load(rm_dir, device="cpu"), ledger=ledger)
    before = _params(load_policy(policy_dir)[0])
    model, _, _ = train_grpo(
        _policy(policy_dir, lr=1e-2),
        GRPOConfig(num_generations=4, prompts_per_step=2),
        reward,
        prompt_rows(tasks),
        tmp_path,
    )
    assert not torch.equal(before, _params(model))
    assert len(ledger.rows) == 2 and ledger.totals["policy"] > 0 and ledger.totals["rm"] > 0
    assert (tmp_path / "model" / "model.safetensors").exists()
    assert any((tmp_path / "checkpoints").glob("checkpoint-*"))


def test_grpo_with_a_kl_penalty_and_the_centred_reward_through_trl(
    policy_dir, rm_dir, world, tmp_path
):
    from orchrm.rl.grpo import train_grpo

    tasks, examples = world
    by_question: dict[str, list[str]] = {}
    for t in tasks:  # the base orchestrator's plans of each question, as `orchrm rl` gives
        by_question[t.question] = [c for p, c in examples if p == policy_prompt(t.question)]
    rows = [{**r, "reference": by_question[r["question"]]} for r in prompt_rows(tasks)]
    ledger = TokenLedger()
    reward = OrchRMReward(OrchRM.load(rm_dir, device="cpu"), ledger=ledger, centre=True)
    config = GRPOConfig(num_generations=4, prompts_per_step=2, beta=0.04, centre=True)
    _, _, history = train_grpo(_policy(policy_dir, lr=1e-2), config, reward, rows, tmp_path)
    kl = [h["kl"] for h in history if "kl" in h]  # TRL logs the KL to its reference
    assert kl and all(k >= 0 for k in kl) and len(ledger.rows) == 2
    rewards = [r["reward"] for r in ledger.rows]
    assert all(-3.0 <= r < 1 for r in rewards)  # in (0, 1), or the penalty of a bad plan


@pytest.mark.slow  # 35 s on 2 cores: TRL reads the 450-token prompt once a sample and pass
def test_trl_grpo_runs_the_bundled_smollm2_with_a_lora_a_kl_and_orchrm_s_reward(
    rm_dir, world, tmp_path
):
    """The TRL user's path on the real orchestrator: TRL's `GRPOTrainer`, two steps, the
    bundled SmolLM2-135M-Instruct with a LoRA reading the full orchestrator prompt as chat
    messages, orchrm's reward function as its `reward_funcs`, a KL to the reference (the
    LoRA switched off). Untrained, SmolLM2 writes prose, not plans (no valid plan in 16 of
    its samples of 160 tokens): every sample gets the penalty, so what is checked here is
    the wiring; the learning is checked on the tiny policy above and in the world study."""
    from orchrm.rl.grpo import train_grpo

    tasks, _ = world
    ledger = TokenLedger()
    reward = OrchRMReward(OrchRM.load(rm_dir, device="cpu"), ledger=ledger)
    policy = PolicyConfig(model="smollm2", steps=2, max_completion_length=16, progress=False)
    config = GRPOConfig(num_generations=2, prompts_per_step=1, beta=0.04, lora_r=2)
    torch.manual_seed(0)
    _, tokenizer, history = train_grpo(
        policy, config, reward, prompt_rows(tasks, chat=True), tmp_path
    )
    kl = [h["kl"] for h in history if "kl" in h]  # TRL logs the KL to its reference
    assert len(kl) == 2 and all(math.isfinite(k) and k >= 0 for k in kl)
    # one reward call a step, on the text of TRL's chat completions: its policy tokens
    # counted, each unparseable sample given the penalty
    assert [r["reward"] for r in ledger.rows] == [config.reward_penalty] * 2
    assert 0 < ledger.totals["policy"] <= 2 * 2 * 16 and ledger.totals["rm"] == 0
    # OUT/model is the LoRA merged into a plain SmolLM2 that transformers loads alone
    assert not (tmp_path / "model" / "adapter_config.json").exists()
    merged, _ = load_policy(tmp_path / "model")
    assert merged.config.num_hidden_layers == 30 and len(tokenizer) == 49152


def test_rft_keeps_right_samples_and_fine_tunes(policy_dir, world, tmp_path):
    from orchrm.rl.rft import train_rft

    tasks, _ = world
    config = world_config()
    ledger = TokenLedger()
    before = _params(load_policy(policy_dir)[0])
    rows = prompt_rows(tasks)
    model, _ = train_rft(
        _policy(policy_dir),
        RFTConfig(samples=4, rounds=1, batch_size=8),
        rows,
        WorldBackend(tasks, 5, None, config),
        config,
        ledger,
        tmp_path,
    )
    row = ledger.rows[0]
    assert row["kept"] > 0 and row["execution"] > 0 and row["policy"] > 0
    assert not torch.equal(before, _params(model))


def test_dpo_steps_through_trl_move_the_weights(policy_dir, world, tmp_path):
    from orchrm.rl.dpo import train_dpo

    _, examples = world
    rows = [{"prompt": p, "chosen": c, "rejected": BROKEN} for p, c in examples[:8]]
    before = _params(load_policy(policy_dir)[0])
    model, _, _ = train_dpo(_policy(policy_dir), DPOConfig(batch_size=4), rows, tmp_path)
    assert not torch.equal(before, _params(model))


def test_evaluation_reports_expected_executed_and_majority_accuracy(policy_dir, world):
    tasks, _ = world
    model, tokenizer = load_policy(policy_dir)
    config = RLExperimentConfig(eval_samples=3, policy=PolicyConfig(seed=2))
    ev = evaluate_policy(model, tokenizer, tasks, config)
    assert ev.tasks == len(tasks) and ev.samples == 3
    for value, (lo, hi) in (
        (ev.expected, ev.expected_ci),
        (ev.executed, ev.executed_ci),
        (ev.majority, ev.majority_ci),
    ):
        assert 0.0 <= lo <= value <= hi <= 1.0
    assert 0.0 < ev.valid <= ev.parsed <= 1.0


def test_the_training_curve_samples_as_long_as_the_final_evaluation(policy_dir, world):
    tasks, _ = world
    model, tokenizer = load_policy(policy_dir)
    config = RLExperimentConfig(eval_samples=2, policy=PolicyConfig(max_completion_length=3))
    curve = curve_callback(tokenizer, tasks[:4], config, {5}, say=lambda _: None)
    curve.on_step_end(None, SimpleNamespace(global_step=4), None, model=model)
    assert curve.points == []
    curve.on_step_end(None, SimpleNamespace(global_step=5), None, model=model)
    (point,) = curve.points
    final = evaluate_policy(model, tokenizer, tasks[:4], config, step=5, majority=False)
    assert point.step == 5 and point.majority is None
    assert 0 < point.mean_tokens <= 3
    assert (point.expected, point.mean_tokens) == (final.expected, final.mean_tokens)


def test_verl_calls_compute_score_with_keywords(rm_dir, world, monkeypatch):
    tasks, examples = world
    monkeypatch.setenv(verl_reward.RM_PATH_ENV, str(rm_dir))
    monkeypatch.delenv(verl_reward.RM_URL_ENV, raising=False)
    plan = next(c for _, c in examples if runnable(c))
    extra = {"question": tasks[0].question, "index": 0}
    # As verl's NaiveRewardManager calls it: keyword arguments, one response at a time.
    result = verl_reward.compute_score(
        data_source="world/math", solution_str=plan, ground_truth=tasks[0].answer, extra_info=extra
    )
    rm = OrchRM.load(rm_dir, device="cpu")
    (scored,) = rm.score_texts([rm.render(tasks[0].question, runnable(plan))])
    expected = rm.info.normalize([scored.score])[0]
    assert result["score"] == pytest.approx(expected, abs=1e-5) and result["valid"] == 1.0
    assert result["rm_tokens"] > 0
    bad = verl_reward.compute_score(
        data_source="world/math", solution_str=BROKEN, ground_truth="1", extra_info=extra
    )
    assert bad == {"score": verl_reward.DEFAULT_PENALTY, "valid": 0.0, "rm_tokens": 0}
    # The batch reward manager's form, with reward kwargs as verl passes them.
    batch = verl_reward.compute_score_batch(
        data_sources=["a", "a"],
        solution_strs=[plan, BROKEN],
        ground_truths=["1", "1"],
        extra_infos=[extra, extra],
        penalty=-5.0,
    )
    assert batch[0]["score"] == pytest.approx(result["score"]) and batch[1]["score"] == -5.0
    with pytest.raises(ValueError, match="question"):
        verl_reward.compute_score("a", plan, "1", extra_info={})


def test_verl_reward_centres_on_the_rows_reference_plans_as_orchrm_rl_does(
    rm_dir, world, monkeypatch
):
    """`centre` in verl's reward kwargs: sigmoid(r - r_ref) from the row's
    extra_info['reference'], the value `OrchRMReward(centre=True)` gives, from many
    threads at once as verl's reward loop calls it; the references are scored once."""
    from concurrent.futures import ThreadPoolExecutor

    tasks, examples = world
    plans = list(dict.fromkeys(c for _, c in examples if runnable(c)))[:4]
    q = tasks[1].question
    reference = [plans[2], BROKEN, plans[3]]
    extra = {"question": q, "reference": reference}
    kwargs = {"rm_path": str(rm_dir), "dtype": "fp32", "centre": "true"}
    monkeypatch.setattr(verl_reward, "_SCORERS", {})  # a fresh worker process's
    rm = OrchRM.load(rm_dir, device="cpu", dtype="fp32")
    want = OrchRMReward(rm, penalty=-7.0, centre=True)(
        [""] * 3, [plans[0], plans[1], BROKEN], question=[q] * 3, reference=[reference] * 3
    )
    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(
            lambda t: verl_reward.compute_score("math", t, "", extra, penalty=-7.0, **kwargs),
            [plans[0], plans[1], BROKEN] * 2,
        ))  # fmt: skip
    assert [r["score"] for r in got] == pytest.approx(want * 2, abs=1e-5)
    assert 0 < got[0]["score"] < 1 and got[2] == {"score": -7.0, "valid": 0.0, "rm_tokens": 0}
    tokens = lambda p: len(rm.tokenizer(rm.render(q, runnable(p)))["input_ids"])  # noqa: E731
    references = tokens(plans[2]) + tokens(plans[3])  # counted once, by the row that scored them
    counted = sum(r["rm_tokens"] for r in got)
    assert counted == 2 * (tokens(plans[0]) + tokens(plans[1])) + references
    assert len({r["rm_reference"] for r in got if r["valid"]}) == 1
    # other references of the same question give another centre (the cache's key)
    alone = {"question": q, "reference": [plans[2]]}
    moved = verl_reward.compute_score("math", plans[0], "", alone, penalty=-7.0, **kwargs)
    assert moved["score"] == pytest.approx(
        OrchRMReward(rm, centre=True)([""], [plans[0]], question=[q], reference=[[plans[2]]])[0],
        abs=1e-5,
    )
    # the centred and the plain reward share the worker's one model
    plain = {k: v for k, v in kwargs.items() if k != "centre"}
    verl_reward.compute_score("math", plans[0], "", {"question": q}, **plain)
    assert len(verl_reward._SCORERS) == 1
    with pytest.raises(InputError, match="reference plans that parse"):
        verl_reward.compute_score("math", plans[0], "", {"question": "another?"}, **kwargs)


def test_verl_reward_scores_through_the_http_service(world):
    tasks, examples = world
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # the service's /score contract
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body, self.headers.get("Authorization")))
            payload = {"results": [{"score": 2.5, "status": "ok", "tokens": 42}], "tokens": 42}
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        plan = next(c for _, c in examples if runnable(c))
        url = f"http://127.0.0.1:{server.server_port}"
        result = verl_reward.compute_score(
            data_source="math",
            solution_str=plan,
            ground_truth="1",
            extra_info={"question": tasks[0].question},
            rm_url=url,
        )
    finally:
        server.shutdown()
    assert result == {"score": 2.5, "valid": 1.0, "rm_tokens": 42}
    path, body, _ = seen[0]
    assert path == "/score" and body == {"question": tasks[0].question, "orchestrations": [plan]}


def test_rl_command_runs_end_to_end_and_reports(policy_dir, rm_dir, tmp_path):
    runner = CliRunner()
    args = ["rl", "--out", str(tmp_path), "--policy", str(policy_dir), "--rm", str(rm_dir)]
    args += ["--steps", "2", "--num-generations", "2", "--prompts-per-step", "2"]
    args += ["--train-tasks", "6", "--eval-tasks", "4", "--eval-samples", "2", "--quiet"]
    args += ["--report-to", "tensorboard"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "grpo-orchrm" / "report.json").read_text())
    start, trained = report["runs"]
    assert start["steps"] == 0 and start["training_tokens"] == 0
    assert trained["name"] == "grpo-orchrm" and trained["steps"] == 2
    assert trained["tokens"]["rm"] > 0 and trained["tokens"]["execution"] == 0
    assert (tmp_path / "grpo-orchrm" / "curve.png").exists()
    assert trained["curve"][0]["step"] == 0 and trained["curve"][-1]["step"] == 2
    # --report-to tensorboard: TRL's rewards and orchrm's held-out curve, read back
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def tags(folder: Path) -> set[str]:
        events = EventAccumulator(str(folder))
        events.Reload()
        return set(events.Tags()["scalars"])

    (trl_run,) = (tmp_path / "grpo-orchrm" / "checkpoints" / "runs").iterdir()
    assert {"train/reward", "train/loss", "train/learning_rate"} <= tags(trl_run)
    (curve_run,) = (tmp_path / "grpo-orchrm" / "runs").iterdir()
    assert {"eval/expected_accuracy", "eval/valid", "final/expected_accuracy"} <= tags(curve_run)


def test_rl_command_rejects_an_unknown_method(tmp_path):
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["rl", "--out", str(tmp_path), "--method", "ppo"]
    )
    assert result.exit_code == 2 and "'ppo' is not one of 'grpo', 'rft', 'dpo'" in result.output
    with pytest.raises(ConfigError, match="method should be 'grpo', 'rft' or 'dpo', got 'ppo'"):
        RLExperimentConfig(method="ppo")  # the library refuses it too


def test_rl_on_your_own_tasks_with_a_lora(policy_dir, rm_dir, world, tmp_path):
    """The GPU user's path on the CPU: a task file, a LoRA on the policy, Orch-RM reward."""
    tasks, _ = world
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps({"question": t.question}) + "\n" for t in tasks))
    args = ["rl", "--out", str(tmp_path / "out"), "--policy", str(policy_dir)]
    args += ["--rm", str(rm_dir), "--tasks", str(task_file), "--lora-r", "4", "--steps", "2"]
    args += ["--num-generations", "2", "--prompts-per-step", "2", "--lr", "1e-2", "--quiet"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = tmp_path / "out" / "grpo-orchrm"
    report = json.loads((out / "report.json").read_text())
    assert report["tasks"] == len(tasks) and report["chat"] is False
    assert report["tokens"]["rm"] > 0 and report["tokens"]["execution"] == 0
    assert [c["last_step"] for c in report["curve"]][-1] >= 1
    # The report is the ledger, summarized: one row per reward call (one a step), finite
    # rewards and valid shares, their means the curve, their RM tokens the total.
    rows = [json.loads(line) for line in (out / "tokens.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert all(math.isfinite(r["reward"]) and 0 <= r["valid"] <= 1 for r in rows)
    assert sum(r["rm"] for r in rows) == report["tokens"]["rm"]
    assert [c["reward"] for c in report["curve"]] == pytest.approx([r["reward"] for r in rows])
    merged = load_policy(out / "model")[0]  # the LoRA merged into a plain causal LM
    assert not torch.equal(_params(load_policy(policy_dir)[0]), _params(merged))
    assert "mean reward" in (out / "report.md").read_text()


def test_rl_on_tasks_refuses_what_it_cannot_do(rm_dir, tmp_path):
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text('{"question": "What is 2+3?"}\n')
    base = ["rl", "--out", str(tmp_path), "--tasks", str(task_file)]
    result = CliRunner().invoke(app, [*base, "--reward", "execution"])
    assert result.exit_code == 2 and "Orch-RM-reward GRPO only" in result.output
    result = CliRunner().invoke(app, base)
    assert result.exit_code == 2 and "needs a reward model" in result.output
    result = CliRunner().invoke(app, [*base, "--rm", str(rm_dir)])
    assert result.exit_code == 2 and "needs a starting policy" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "ok"}\nnot json\n')
    result = CliRunner().invoke(app, [*base[:3], str(bad), "--rm", str(rm_dir), "--policy", "x"])
    assert result.exit_code == 2 and "bad.jsonl" in result.output


def test_the_default_policy_trains_in_proportion_to_its_examples():
    config = TinyPolicyConfig()
    assert config.steps_for(300 * 8) == 600  # the default run: 8 passes of batch 32
    assert config.steps_for(40 * 8) == 80
    assert config.steps_for(10) == 50
    assert TinyPolicyConfig(sft_steps=7).steps_for(10_000) == 7


def test_each_method_trains_with_its_defaults_as_orchrm_rl_runs_it(tmp_path):
    """The defaults `orchrm rl` trains with: 150 steps at 3e-4, 32 samples (GRPO) or
    examples (RFT) per step, 16 DPO pairs per step at 5e-5, a checkpoint at each of the
    four curve points."""
    from orchrm.rl.grpo import grpo_args, shared_args

    config = RLExperimentConfig()
    policy = config.trainer_policy("p")
    args = grpo_args(policy, config.grpo, tmp_path)
    assert (args.max_steps, args.learning_rate, args.per_device_train_batch_size) == (
        150,
        3e-4,
        32,
    )
    assert (args.num_generations, args.beta, args.max_completion_length) == (8, 0.0, 96)
    assert args.save_steps == 37 and args.seed == 0 and not args.use_vllm
    assert PolicyConfig(steps=150).checkpoint_every == 37
    assert shared_args(config.trainer_policy("p"))["save_steps"] == 37
    assert (config.rft.samples, config.rft.rounds, config.rft.batch_size) == (8, 2, 32)
    # the reward built here: two members, their worst case (the ensemble's own aggregate)
    assert (config.rm_members, config.grpo.aggregate, config.grpo.diversity) == (2, "", 0.0)
    assert (config.dpo.lr, config.dpo.beta, config.dpo.batch_size) == (5e-5, 0.1, 16)
    assert config.grpo.reward_penalty == -3.0
    assert config.for_run("grpo-execution").grpo.reward_penalty == -1.0
    assert [config.for_run(r).run_name for r in ("grpo-execution", "rft", "dpo")] == [
        "grpo-execution",
        "rft",
        "dpo",
    ]
    assert replace(config, curve_points=2).trainer_policy("p").save_steps == 75
    with pytest.raises(ConfigError, match="unknown run 'ppo'"):
        config.for_run("ppo")


def test_trainers_refuse_a_policy_config_without_a_model(tmp_path):
    from orchrm.rl.dpo import train_dpo
    from orchrm.rl.grpo import train_grpo

    rows = [{"prompt": "p", "chosen": "a", "rejected": "b"}]
    with pytest.raises(ConfigError, match=r"PolicyConfig\.model is empty"):
        train_dpo(PolicyConfig(), DPOConfig(), rows, tmp_path)
    with pytest.raises(ConfigError, match=r"PolicyConfig\.model is empty"):
        train_grpo(PolicyConfig(), GRPOConfig(), lambda **_: [], [{"prompt": "p"}], tmp_path)


def test_rl_command_sets_each_method_config(tmp_path, monkeypatch):
    import orchrm.experiments.rl_world.compare as rl_compare
    import orchrm.experiments.rl_world.pipeline as rl_pipeline

    seen = []
    monkeypatch.setattr(rl_pipeline, "run", lambda config, say: seen.append(config) or tmp_path)
    monkeypatch.setattr(rl_compare, "terminal_report", lambda report: "")
    args = ["rl", "--out", str(tmp_path), "--method", "dpo", "--lr", "2e-3", "--seed", "3"]
    args += ["--dpo-lr", "1e-4", "--dpo-beta", "0.2", "--beta", "0.05", "--reward", "execution"]
    args += ["--rft-samples", "2", "--threads", "2", "--policy", "some/dir", "--quiet"]
    args += ["--diversity", "0.25", "--rm-members", "3"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (config,) = seen
    assert (config.method, config.run_name, config.num_threads) == ("dpo", "dpo", 2)
    assert (config.policy.lr, config.policy.seed, config.seed) == (2e-3, 3, 3)
    assert config.policy.model == "some/dir" and config.policy.progress is False
    assert (config.dpo.lr, config.dpo.beta) == (1e-4, 0.2)
    assert (config.grpo.beta, config.grpo.reward) == (0.05, "execution")
    assert (config.grpo.diversity, config.rm_members) == (0.25, 3)
    assert config.rft.samples == 2 and config.tiny_policy == TinyPolicyConfig()
    # OUT/config.yaml repeats the run; an option given beside it wins.
    again = ["rl", "--config", str(tmp_path / "config.yaml"), "--rft-rounds", "3", "--quiet"]
    result = CliRunner().invoke(app, again)
    assert result.exit_code == 0, result.output
    assert seen[1] == replace(config, rft=replace(config.rft, rounds=3))


def test_the_rl_library_imports_no_world_experiment_or_store():
    """`orchrm.rl` trains any policy on any rows; the world run lives in experiments."""
    folder = Path(__file__).parent.parent / "orchrm" / "rl"
    banned = ("orchrm.world", "orchrm.experiments", "orchrm.store", "orchrm.tasks.benchmarks")
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            found += [f"{path.name}: {n}" for n in names if n.startswith(banned)]
    assert found == []


def _policy_eval(step: int, expected: float) -> PolicyEval:
    """A held-out evaluation at `step` with an interval around `expected`."""
    return PolicyEval(
        step=step,
        tasks=6,
        samples=4,
        expected=expected,
        expected_ci=(expected - 0.1, expected + 0.08),
        executed=expected - 0.05,
        executed_ci=(expected - 0.15, expected + 0.05),
        majority=expected,
        majority_ci=(expected - 0.2, expected + 0.1),
        valid=0.9,
        parsed=0.95,
        mean_tokens=60.0,
        seconds=1.0,
    )


def test_learning_curve_starts_every_run_at_step_0_and_tables_fit_a_terminal(tmp_path):
    from matplotlib.container import ErrorbarContainer

    from orchrm.experiments.rl_world.compare import (
        RunReport,
        curve_figure,
        terminal_report,
        write_report,
    )

    start = _policy_eval(0, 0.30)
    runs = [
        RunReport("start (SFT on base)", _policy_eval(0, 0.31), [start]),
        RunReport(
            "grpo-orchrm",
            _policy_eval(3, 0.45),
            [start, _policy_eval(2, 0.38), _policy_eval(3, 0.44)],
            {"policy": 123_456, "rm": 234_567, "execution": 0},
            8_765_432,
            312.0,
            3,
        ),
        # a curve without its step 0 still starts from the starting policy
        RunReport("rft", _policy_eval(3, 0.37), [_policy_eval(3, 0.36)], {"policy": 9}, 0, 5.0, 3),
    ]
    ax = curve_figure(runs, "world math").axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["grpo-orchrm"].get_xdata()) == [0, 2, 3]
    assert list(lines["rft"].get_xdata()) == [0, 3]
    assert lines["rft"].get_ydata()[0] == pytest.approx(30.0)
    (star,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert star.get_label() == "start (SFT on base), step 0" and star.has_yerr
    assert list(star.lines[0].get_xdata()) == [0]
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks) and 1 in ticks
    report = write_report(runs, tmp_path, "world math", {"seconds": 9, "config": {"steps": 3}})
    assert (tmp_path / "curve.png").stat().st_size > 5000
    for width in (80, 120):
        text = terminal_report(report, width)
        assert max(map(len, text.splitlines())) <= width
        assert all(f"\n{r.name}  " in text for r in runs)  # every name in full
        assert "seconds: 9" in text and "steps': 3" not in text
    assert "not shown at 80 columns" in terminal_report(report, 80)
    assert "| grpo-orchrm |" in report.read_text()  # the report file keeps its Markdown
