"""The ``squeez`` command: ``some_command | squeez "what I need"``, plus ``squeez eval`` and ``squeez show``.

Thin: each subcommand parses its flags and calls the library. Heavy imports happen only inside the
backend that needs them, so piping through the BM25 backend starts fast.

    prune.py     the pipe itself (fail-open, timeout, stdout hygiene); pipe.py its answer stream
    show.py      ``squeez show ID``, the full output behind an answer, from store.py
    settings.py  flags > SQUEEZ_* environment > config file > defaults
    eval.py      ``squeez eval`` (``--ray``: the same evaluation on Ray Data)
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["eval"]:
        from squeez_ray.cli.eval import main as eval_main

        return eval_main(argv[1:])
    if argv[:1] == ["show"]:
        from squeez_ray.cli.show import show_main

        return show_main(argv[1:])
    from squeez_ray.cli.prune import main as prune_main

    return prune_main(argv)
