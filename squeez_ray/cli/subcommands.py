"""Which command a line names: ``squeez show ID``, or the pipe's query ``show the failures``.

An unquoted query may start with a subcommand word (``pytest 2>&1 | squeez show the failures``).
Sent to ``squeez show``, it finds no such id and the piped output is lost. So when input is piped in
(or ``--input-file`` names it) and the words after a subcommand word are not that subcommand's
arguments, the whole line is the pipe's query, as any unquoted query is. A line the subcommand
accepts runs it whatever stdin is (``squeez show ID --lines A-B``, ``squeez run Q -- CMD``, a hook
reading its JSON payload); without input there is nothing to lose, and the subcommand says what
was wrong.
"""

from __future__ import annotations

import argparse
import os
import stat

WORDS = ("eval", "show", "run", "hook", "install", "uninstall", "mcp", "report", "daemon")


class _NotIt(Exception):
    """The words are not a command line of the subcommand (the message says why)."""


def misread_query(argv: list[str]) -> str | None:
    """When ``argv`` starts with a subcommand word that the rest does not fit, and input is piped in:
    why it is not that subcommand (then the whole line is the pipe's query). Else None: run it."""
    if not argv or argv[0] not in WORDS or not _input_given(argv):
        return None
    word, rest = argv[0], argv[1:]
    own = rest[:rest.index("--")] if word == "run" and "--" in rest else rest
    if "-h" in own or "--help" in own:  # asking a subcommand for its help is that subcommand
        return None
    try:
        _CHECKS[word](word, rest)
    except _NotIt as why:
        return f"this is not a `squeez {word}` command line ({why})"
    except Exception:  # noqa: BLE001 - e.g. an extra this install lacks: the subcommand itself says what is wrong
        return None
    return None


def _input_given(argv: list[str]) -> bool:
    """stdin is a pipe, socket or file (not a terminal, not /dev/null), or --input-file is given."""
    if any(word == "--input-file" or word.startswith("--input-file=") for word in argv):
        return True
    try:
        mode = os.fstat(0).st_mode
    except (OSError, ValueError):  # stdin closed
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISREG(mode)


def _refusing(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser``, raising _NotIt on a mistake where argparse would print its usage and exit."""
    def refuse(message: str):
        raise _NotIt(message)

    parser.error = refuse  # type: ignore[method-assign]
    return parser


def _parse(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    return _refusing(parser).parse_args(words)


def _show(word: str, words: list[str]) -> None:
    from squeez_ray.cli.show import build_parser
    from squeez_ray.cli.store import is_id_shaped

    ident = _parse(build_parser(), words).id
    if not is_id_shaped(ident):
        raise _NotIt(f"{ident!r} is not a store id")


def _run(word: str, words: list[str]) -> None:
    from squeez_ray.cli.run import build_parser

    if "--" not in words:
        raise _NotIt("no `--` before a command")
    split = words.index("--")
    if not words[split + 1:]:
        raise _NotIt("no command after `--`")
    if not _parse(build_parser(), words[:split]).query.strip():
        raise _NotIt("the query is empty")


def _hooks(word: str, words: list[str]) -> None:
    from squeez_ray.cli.hooks.install import build_parser

    _parse(build_parser(word), words)


def _mcp(word: str, words: list[str]) -> None:
    from squeez_ray.cli.mcp_server import build_parser

    _parse(build_parser(), words)


def _report(word: str, words: list[str]) -> None:
    from squeez_ray.cli.report import build_parser, missing_paths

    missing = missing_paths(_parse(build_parser(), words).paths)
    if missing:
        raise _NotIt(missing)


def _daemon(word: str, words: list[str]) -> None:
    from squeez_ray.cli.daemon import build_parser

    _parse(build_parser(), words)


def _eval(word: str, words: list[str]) -> None:
    from squeez_ray.cli.eval import build_parser
    from squeez_ray.runner import parse_flags

    parse_flags(_refusing(build_parser()), words)  # key=value words and --config too, as `squeez eval` reads them


_CHECKS = {"eval": _eval, "show": _show, "run": _run, "hook": _hooks, "install": _hooks, "uninstall": _hooks,
           "mcp": _mcp, "report": _report, "daemon": _daemon}
