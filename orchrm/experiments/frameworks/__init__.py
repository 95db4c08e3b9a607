"""orchrm driven by the RL frameworks' own client code on the world's plans: verl's
reward loop and OpenRLHF's remote-reward client (`drive.py`, run by
`benchmarks/framework_clients.py`), and OpenRLHF's client posting a rollout's requests at
once (`openrlhf_rollout.py`)."""
