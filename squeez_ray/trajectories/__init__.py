"""Stored agent runs: one adapter per format, and the re-prune pipeline.

Adapters (``swe_agent``, ``mini_swe_agent``, ``openhands``, ``openhands_v1``, ``claude_code``,
``codex``) read a run, list its tool observations and write pruned text back into every copy;
``detect`` picks the adapter from content; ``verify`` checks that only observations changed;
``process`` re-prunes a group of files with one pruner; ``pipeline`` runs that on Ray Data with
resume; ``report`` totals the per-file results. ``jobs/reprune.py`` is the entry point.
"""
