"""The paper's real benchmarks: their official task files (`loaders`) and the checker that
says whether an answer is right for each (`grading`)."""
