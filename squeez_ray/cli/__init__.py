"""The ``squeez`` command: ``some_command | squeez "what I need"``, plus ``squeez eval`` and ``squeez show``.

Thin: each subcommand parses its flags and calls the library. Heavy imports happen only inside the
backend that needs them, so piping through the BM25 backend starts fast.

    prune.py     the pipe itself (fail-open, timeout, stdout hygiene); pipe.py its answer stream
    show.py      ``squeez show ID``, the full output behind an answer, from store.py
    settings.py  flags > SQUEEZ_* environment > config file > defaults
    eval.py      ``squeez eval`` (``--ray``: the same evaluation on Ray Data)
    run.py       ``squeez run QUERY -- CMD``: run, prune (markers.py, failure_lines.py), keep the exit code
    hooks/       ``squeez hook|install|uninstall claude-code|codex``: the agents' PreToolUse hooks
    mcp_server.py  ``squeez mcp``, the prune / run / show tools over the Model Context Protocol
    report.py    ``squeez report``, what the hook would have saved on stored agent runs
    daemon.py    ``squeez daemon start|stop|status``, the warm pruner process (daemon_client.py, daemon_wire.py)
    subcommands.py  whether ``squeez show the failures`` (input piped in) is ``squeez show`` or a query
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from squeez_ray.cli.subcommands import misread_query

    misread = misread_query(argv)
    if misread is not None:  # `pytest | squeez show the failures`: a query, which must not cost the output
        from squeez_ray.cli.pipe import note
        from squeez_ray.cli.prune import main as prune_main

        note(f"{misread}: the input is pruned with the whole line as its query (quote a query that starts "
             f"with a subcommand word)")
        return prune_main(argv, misread=True)
    if argv[:1] == ["eval"]:
        try:
            from squeez_ray.cli.eval import main as eval_main

            return eval_main(argv[1:])
        except ModuleNotFoundError as error:  # the plain install has no pyarrow / Ray: say which extra
            from squeez_ray.infer.registry import EXTRA_OF_MODULE

            missing = (error.name or "").split(".")[0]
            if missing not in EXTRA_OF_MODULE:
                raise
            print(f"squeez eval: needs {missing}, which this install lacks: pip install {EXTRA_OF_MODULE[missing]}",
                  file=sys.stderr)
            return 2
    if argv[:1] == ["show"]:
        from squeez_ray.cli.show import show_main

        return show_main(argv[1:])
    if argv[:1] == ["run"]:
        from squeez_ray.cli.run import run_main

        return run_main(argv[1:])
    if argv[:1] in (["hook"], ["install"], ["uninstall"]):
        from squeez_ray.cli.hooks.install import hooks_main

        return hooks_main(argv)
    if argv[:1] == ["mcp"]:
        from squeez_ray.cli.mcp_server import main as mcp_main

        return mcp_main(argv[1:])
    if argv[:1] == ["daemon"]:
        from squeez_ray.cli.daemon import main as daemon_main

        return daemon_main(argv[1:])
    if argv[:1] == ["report"]:
        from squeez_ray.cli.report import main as report_main

        return report_main(argv[1:])
    from squeez_ray.cli.prune import main as prune_main

    return prune_main(argv)
