"""The flags of the ``squeez`` pipe, read so that a mistake in them never costs the piped output.

argparse exits on a bad flag before any input is read (nothing on stdout): here a mistake is a
UsageError instead, and the flags that could still be read come back with it, so the pipe passes
the output through as they asked (``--json``, ``--input-file``, ``--strict``) and exits 2.
"""

from __future__ import annotations

import argparse

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.pipe import note
from squeez_ray.infer.registry import add_backend_arguments


# `squeez --help` names every subcommand (subcommands.WORDS; test_cli_help checks the two agree), before the
# pipe's long flag list.
COMMANDS = (
    ("run QUERY -- CMD", "run CMD, prune its output, keep its exit code"),
    ("show ID", "the full output behind a pruned answer (--lines A-B)"),
    ("hook AGENT", "the PreToolUse hook the agent calls (claude-code, codex)"),
    ("install AGENT", "add that hook to the agent's settings (uninstall AGENT: remove it)"),
    ("mcp", "the prune / run / show tools over the Model Context Protocol"),
    ("report RUNS", "what the hook would have saved on stored agent runs"),
    ("eval", "score pruners on labelled cases (--ray: on Ray Data)"),
    ("daemon start|stop|status", "the warm pruner process the other commands use"),
)


def commands_help() -> str:
    width = max(len(usage) for usage, _ in COMMANDS) + len("squeez ") + 2
    return "commands (squeez COMMAND -h for each):\n" + "".join(
        f"  {('squeez ' + usage).ljust(width)}{what}\n" for usage, what in COMMANDS)


class UsageError(Exception):
    """A problem the user fixes on the command line or in the config (exit 2)."""


class _Parser(argparse.ArgumentParser):
    """Raises UsageError instead of exiting: a flag mistake must still pass the piped output through."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (squeez --help lists the flags)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="squeez", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="some_command | squeez [OPTIONS] QUERY\n       squeez COMMAND ...",
        description="Keep only the lines of a tool output that answer a query (verbatim).\n\n" + commands_help(),
        epilog="examples:\n  pytest -q 2>&1 | squeez \"which test failed and why\"\n"
               "  squeez --input-file build.log --json \"the first compiler error\"\n"
               "  squeez show 3f2a9c1b7d4e    # the full output behind a pruned answer\n"
               "  squeez run \"which tests fail\" -- pytest -q   # run, prune, keep the exit code (squeez run -h)\n"
               "  squeez install claude-code  # the agent hook (also: codex; squeez install -h)\n\n"
               "--timeout bounds the whole call, engine start included (default 60 s); past it, or on any\n"
               "backend error, the full output is printed unchanged (exit 0; --strict: exit 1).\n"
               "Settings: flags > SQUEEZ_* environment > config file ($SQUEEZ_CONFIG or "
               "~/.config/squeez/config.yaml) > defaults.")
    parser.add_argument("query", nargs="*", help="what the agent needs from this output (quote it; words "
                                                 "given unquoted are joined into one query)")
    parser.add_argument("--input-file", help="read the tool output from this file instead of stdin")
    parser.add_argument("--markers", action=argparse.BooleanOptionalAction, default=None,
                        help="mark each cut stretch in place: '[squeez: N lines omitted (A-B); squeez show ID "
                             "--lines A-B]'")
    parser.add_argument("--json", action="store_true", help="print one JSON object (spans, text, counts, store_id)")
    parser.add_argument("--stats", action="store_true", help="print lines / tokens kept and latency to stderr")
    parser.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                        help="a backend error or timeout exits 1 instead of passing the output through")
    parser.add_argument("--store", dest="store_outputs", action=argparse.BooleanOptionalAction, default=None,
                        help="keep the full output for `squeez show ID` (default: on)")
    add_pruning_flags(parser)
    return parser


def add_pruning_flags(parser: argparse.ArgumentParser) -> None:
    """The flags ``squeez`` (the pipe) and ``squeez run`` share: which pruner, which config, how kept lines
    look, where full outputs go. One declaration, so that the two commands cannot drift apart."""
    parser.add_argument("--backend", help="pruner: " + ", ".join(settings_mod.BACKENDS))
    add_config_flag(parser)
    parser.add_argument("--line-numbers", action=argparse.BooleanOptionalAction, default=None,
                        help="prefix kept lines with their source line number")
    parser.add_argument("--tool-type", help="hint: the tool that produced the output (read_file, grep, pytest, ...)")
    parser.add_argument("--budget", dest="budget_s", type=float,
                        help="seconds the model may spend on this output before it answers from what it scored "
                             "(default 10; the answer says so)")
    add_store_dir_flag(parser)
    parser.add_argument("--lossy", action=argparse.BooleanOptionalAction, default=None,
                        help="prune even when the full output cannot be kept for `squeez show` (default: pass "
                             "it through unpruned)")
    add_backend_arguments(parser)


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    """``--config``, as every ``squeez`` command that reads the settings takes it (pipe, run, show, report,
    mcp, daemon)."""
    parser.add_argument("--config", help="config file (default: $SQUEEZ_CONFIG or ~/.config/squeez/config.yaml)")


def add_store_dir_flag(parser: argparse.ArgumentParser) -> None:
    """``--store-dir``: where the pipe and ``squeez run`` keep full outputs and ``squeez show`` reads them."""
    parser.add_argument("--store-dir", help="where full outputs are kept (default: $SQUEEZ_STORE or "
                                            "~/.cache/squeez/store)")


def parse_arguments(argv: list[str]) -> tuple[argparse.Namespace, str | None]:
    """(flags, usage error): on a mistake, the flags that could still be read (for --input-file, --json,
    --strict, --config), so that the output can be passed through as the flags asked."""
    parser = build_parser()
    try:
        args = parser.parse_intermixed_args(argv)
    except UsageError as error:
        try:
            args = parser.parse_known_intermixed_args(argv)[0]
        except UsageError:
            args = parser.parse_intermixed_args([])
        args.query = None
        return args, str(error)
    words = args.query or []
    args.query = " ".join(words) or None
    if len(words) > 1:
        # `squeez which test failed`: what the user means is plain, and refusing would cost the output.
        note(f"the query came as {len(words)} separate words; read as one query: {args.query!r} "
              f"(quote it to pass it as one argument)")
    return args, None


