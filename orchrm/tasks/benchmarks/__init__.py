"""The paper's real benchmarks, one module each (`aime`, `hotpotqa`, `browsecomp_plus`,
`gpqa`): how its official file becomes tasks and how its answers are checked, as one
`Benchmark` (`base`); `registry` names them all and loads any of them. `generated` draws
exact-answer math tasks from a seed and writes them as task files that `orchrm run
--tasks` reads as they are."""
