"""Pruners: one small interface (query + tool output in, line spans out) and its backends."""
