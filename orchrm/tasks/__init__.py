"""Tasks and their answers: the Task type and task files (`task`), sampling, executing and
grading orchestrations (`run`, `job`), the paper's real benchmarks, one module each
(`benchmarks`), and whether an answer is right (`answers`, `grading`)."""
