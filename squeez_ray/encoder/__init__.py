"""A fast CPU pruner: a small encoder scores every line of a tool output against the query."""
