"""Sources of tool outputs beyond the SWE-bench collection: source trees and the calls planned over
them (``source_tree``), PyPI packages (``packages``), generated scratch projects (``scratch``), and the
hand-label recipes (``python_pool``, ``ecosystems``, ``service_logs`` on the ``recipe_tree`` scaffold;
``reserved`` names the sources kept for evaluation)."""
