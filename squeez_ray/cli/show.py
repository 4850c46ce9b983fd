"""``squeez show ID``: print the full output behind a pruned answer, byte-exact, from the local store."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.pipe import EXIT_BACKEND, EXIT_OK, EXIT_USAGE, note
from squeez_ray.cli.store import OutputStore, StoreError
from squeez_ray.config import ConfigError


def open_store(settings: settings_mod.Settings) -> OutputStore:
    root = settings.store_dir or settings_mod.default_store_dir(os.environ)
    return OutputStore(root, int(settings.store_max_mb * (1 << 20)))


def build_parser() -> argparse.ArgumentParser:
    from squeez_ray.cli.args import add_config_flag, add_store_dir_flag

    parser = argparse.ArgumentParser(prog="squeez show", description="Print the full output behind a pruned answer.",
                                     epilog="To prune with the query 'show', write: squeez -- show")
    parser.add_argument("id", help="the id from the footer of a pruned answer (a unique prefix is enough)")
    parser.add_argument("--lines", metavar="A-B", help="print only lines A to B (1-based, inclusive) of the output")
    add_store_dir_flag(parser)
    add_config_flag(parser)
    return parser


def show_main(argv: list[str]) -> int:
    """``squeez show ID``: print a stored full output, byte-exact."""
    args = build_parser().parse_args(argv)
    try:
        settings = settings_mod.resolve({"store_dir": args.store_dir}, config_path=args.config)
    except ConfigError as error:
        # `show` needs only the store: a config that cannot prune must not hide the outputs kept so far.
        settings = settings_mod.store_only_settings(args.store_dir, config_path=args.config)
        note(f"config ignored, reading the store {open_store(settings).root}: {error}")
    try:
        data = open_store(settings).get(args.id)
    except OSError as error:
        note(f"cannot read the store: {error}")
        return EXIT_BACKEND
    except StoreError as error:
        note(str(error))
        return EXIT_BACKEND
    if sys.stdout is None:  # started with stdout closed (`squeez show ID >&-`)
        note("cannot print the output: stdout is closed")
        return EXIT_BACKEND
    if args.lines is not None:  # the stretch a `[squeez: N lines omitted (A-B); ...]` marker names
        from squeez_ray.cli.markers import LinesError, parse_line_range, select_lines

        try:
            data = select_lines(data, *parse_line_range(args.lines), ident=f"output {args.id}")
        except LinesError as error:
            note(str(error))
            return EXIT_USAGE
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except OSError as error:  # the reader went away, a full disk (`> /dev/full`), ...
        # Nothing more can reach stdout: point it at /dev/null so the exit flush does not fail again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if isinstance(error, BrokenPipeError):  # `squeez show ID | head`: not an error
            return EXIT_OK
        note(f"cannot print the output: {error.strerror or error}")
        return EXIT_BACKEND
    return EXIT_OK


def show_lines(store_id: str, start: int, end: int, settings: settings_mod.Settings | None = None) -> str:
    """Lines ``start``..``end`` (1-based, inclusive) of a stored output, as text.

    Raises LinesError (out of range) or StoreError (unknown / ambiguous id), each with a one-line message.
    """
    from squeez_ray.cli.markers import select_lines

    if settings is None:
        settings = settings_mod.store_only_settings(None)
    data = open_store(settings).get(store_id)
    return select_lines(data, start, end, ident=f"output {store_id}").decode("utf-8", errors="replace")
