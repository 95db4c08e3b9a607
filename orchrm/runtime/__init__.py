"""Execution: sub-agents, the graph executor, LLM backends and token accounting."""
