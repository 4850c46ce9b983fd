"""squeez-ray: task-conditioned tool-output pruning on Ray."""

__version__ = "0.1.0"
