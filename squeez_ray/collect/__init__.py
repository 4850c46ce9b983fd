"""Collection: real tools over repository snapshots, sandboxed, on Ray Data (docs/DATA.md, "Collection").

``instances`` (input rows, patch/issue parsing), ``plan`` (seeded tool-call plans), ``tools`` (one
executor per tool type; ``run_tool`` for use on any directory), ``sandbox`` (process isolation),
``workspace`` (mirrors and private checkouts), ``pipeline`` (the Ray Data job), ``toy`` (a small real
input for tests, benchmarks and the local demo), ``pool`` (the raw outputs a hand labeller reads),
``sources/`` (other sources of tool outputs: packages, scratch projects, the hand-label recipes).
"""
