"""Best-of-N: choose one of N orchestrations before anything runs, and measure the choice.

- `selectors`: the strategies (the reward model, majority vote, random, oracle, ...) and
  the verification tokens each spends;
- `judges`: LLM-as-a-judge at orchestration and at trajectory level;
- `reruns`: the offline world's executions of the chosen plans;
- `registry`: one entry per selector (label, colour, what it needs, whether it replays
  re-executions): adding a selector is its function plus one entry there;
- `lineup`: the selectors an evaluation compares (from the registry), with the world's
  judge and re-executions, built once for every command;
- `metrics`: accuracy with bootstrap intervals, paired against a baseline;
- `reliability`: how well the reward model's calibrated P(correct) matches outcomes;
- `report`: the tables and the notes; `plots`: the PNGs (accuracy vs N and vs tokens, the
  Pareto plot, the reliability diagram);
- `crossval`: leave-one-task-out and k-fold evaluation for logs too small to hold tasks out.
"""
