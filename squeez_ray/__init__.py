"""squeez-ray: task-conditioned tool-output pruning on Ray."""

from squeez_ray import _moved

__version__ = "0.1.0"
_moved.install()  # old import paths of moved modules keep working for one release
