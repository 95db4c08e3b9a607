"""`orchrm demo`: the whole story on the offline world (`run.py`), with what the command
line may set kept apart from it (`config.py`) so reading options loads no PyTorch."""
