"""The README's library example runs as written: a saved reward model (the offline MiniLM
with a seeded, untrained head) scores a task's plans, and the pick is the best-scored one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_library_example_scores_and_picks(tmp_path, monkeypatch):
    import torch

    from orchrm.rmodel.backbone import load_backbone
    from orchrm.rmodel.tokens import default_backbone
    from orchrm.training.build import save_model
    from orchrm.world.orchestrators import orchestrators
    from orchrm.world.tasks import generate_tasks

    torch.manual_seed(0)
    model, tokenizer = load_backbone(default_backbone())
    monkeypatch.chdir(tmp_path)
    save_model(model, tokenizer, Path("runs/rm/model"), {"max_length": 96})
    task = generate_tasks("math", 1, seed=3)[0]
    writer = orchestrators(seed=3)["specialized"]
    plans = [writer.write(task, i)[0] for i in range(4)] + ["<agent>no name</agent>"]
    (example,) = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    names = {"question": task.question, "plans": plans}
    exec(compile(example, "README.md", "exec"), names)
    scored, best = names["scored"], names["best"]
    assert len(scored) == len(plans) and scored[-1].score is None and scored[-1].reason
    top = max(range(len(plans) - 1), key=lambda i: scored[i].score)
    assert best is plans[top]
