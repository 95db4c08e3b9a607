"""orchrm: reward modeling for multi-agent orchestrations."""

__version__ = "0.1.0"
