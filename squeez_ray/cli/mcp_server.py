"""``squeez mcp``: the pruner as a Model Context Protocol server over stdio (the official ``mcp`` SDK, 2.x).

Three tools, the same functions ``squeez run`` and ``squeez show`` use:

- ``prune(query, text)``: the lines of ``text`` that answer ``query``, dropped stretches marked in place;
- ``run(query, command, cwd)``: run ``command`` (``bash -c``) in ``cwd``, prune its merged stdout/stderr,
  and say its exit code (a failing command is a normal answer, not a tool error);
- ``show(id, lines)``: the stored original behind a marker, whole or lines ``A-B``.

Every failure of ours (bad arguments, an unknown id, a broken config, a command that cannot start, a
bug) comes back as a tool error (``is_error``) with a one-line message; the server keeps serving.
Settings are read once at start (flags > ``SQUEEZ_*`` > config file), as for the pipe; a config that
does not resolve is reported on every call that needs it instead of stopping the server.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
from typing import TYPE_CHECKING, Any

from squeez_ray.cli.pipe import EXIT_OK, EXIT_USAGE, note

if TYPE_CHECKING:
    from squeez_ray.cli.settings import Settings

log = logging.getLogger("squeez.mcp")
_LONE_SURROGATE = re.compile("[\\ud800-\\udfff]")

INSTRUCTIONS = (
    "squeez keeps only the lines of a tool output that answer a query, verbatim. Use `run` instead of a "
    "plain shell for commands with long output (tests, builds, linters, grep, git log/diff): its answer "
    "ends with the command's exit code. Each dropped stretch is marked '[squeez: N lines omitted (A-B); "
    "squeez show ID --lines A-B]': call `show` with that id and range to read them.")


class _Tools:
    """The three tools over one set of settings (resolved once; a config error is kept to report)."""

    def __init__(self, config_path: str | None = None):
        from squeez_ray.cli import settings as settings_mod
        from squeez_ray.config import ConfigError

        self.config_path = config_path
        self.settings: Settings | None = None  # None: prune_output fails open with the config error as its note
        try:
            self.settings = settings_mod.resolve({"markers": True}, config_path=config_path)
        except ConfigError as error:
            log.warning("squeez mcp: config error, outputs pass through unpruned: %s", error)

    def prune(self, query: str, text: str) -> str:
        from mcp.server.mcpserver.exceptions import ToolError

        from squeez_ray.cli.run import prune_output

        if not query.strip():
            raise ToolError("query is empty: say what you need from this output")
        limit = self._max_input_bytes()
        if len(text) > limit // 4 and len(text.encode("utf-8", errors="surrogatepass")) > limit:
            raise ToolError(f"text is over max_input_mb={limit / (1 << 20):g}: not pruned (it would take gigabytes "
                            f"and minutes); send a part of it")
        return _answer(prune_output(query, text, self.settings))

    def _max_input_bytes(self) -> int:
        from squeez_ray.cli import settings as settings_mod

        mb = self.settings.max_input_mb if self.settings is not None else settings_mod.CommandSettings.max_input_mb
        return int(mb * (1 << 20))

    def run(self, query: str, command: str, cwd: str | None = None) -> str:
        from mcp.server.mcpserver.exceptions import ToolError

        from squeez_ray.cli.run import RunError, run_command

        if not query.strip():
            raise ToolError("query is empty: say what you need from the command's output")
        if not command.strip():
            raise ToolError("command is empty")
        if cwd is not None and not os.path.isdir(cwd):
            raise ToolError(f"cwd {cwd!r} is not a directory")
        try:
            result = run_command(query, command, cwd=cwd, settings=self.settings)
        except RunError as error:  # the command could not start (the message says why, in one line)
            raise ToolError(_one_line(str(error))) from None
        return _answer(result) + f"[exit code {result.exit_code}]"

    def show(self, id: str, lines: str | None = None) -> str:
        from mcp.server.mcpserver.exceptions import ToolError

        from squeez_ray.cli import settings as settings_mod
        from squeez_ray.cli.markers import LinesError, parse_line_range
        from squeez_ray.cli.show import open_store, show_lines
        from squeez_ray.cli.store import StoreError

        # `show` needs only the store: a config that cannot prune must not hide the outputs kept so far.
        settings = self.settings or settings_mod.store_only_settings(None, config_path=self.config_path)
        try:
            if lines:
                start, end = parse_line_range(lines)
                return show_lines(id, start, end, settings)
            return open_store(settings).get(id).decode("utf-8", errors="replace")
        except (LinesError, StoreError) as error:
            raise ToolError(str(error)) from None
        except OSError as error:
            raise ToolError(f"cannot read the store: {error}") from None


def build_server(config_path: str | None = None) -> Any:
    """The MCPServer with the three tools registered (not started)."""
    from mcp.server.mcpserver import MCPServer

    tools = _Tools(config_path)
    server = MCPServer("squeez", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(description="Keep only the lines of `text` (a tool output) that answer `query`, verbatim; "
                             "each dropped stretch is marked with the `show` call that prints it.")
    def prune(query: str, text: str) -> str:
        return _guarded("prune", tools.prune, query, text)

    @server.tool(description="Run `command` with bash in `cwd` (default: the server's directory), stdout and "
                             "stderr merged, and return the lines that answer `query`, then '[exit code N]'. "
                             "Lines that show a failure are always kept.")
    def run(query: str, command: str, cwd: str | None = None) -> str:
        return _guarded("run", tools.run, query, command, cwd)

    @server.tool(description="Print the stored original output behind a squeez answer: `id` from its marker "
                             "or footer, `lines` an optional range 'A-B' (1-based, inclusive).")
    def show(id: str, lines: str | None = None) -> str:
        return _guarded("show", tools.show, id, lines)

    return server


def _guarded(name: str, fn: Any, *args: Any) -> str:
    """Expected failures pass as ToolError; a bug of ours becomes one too, with its type and message
    (the SDK would otherwise hide it behind 'Error executing tool'), logged with its traceback."""
    from mcp.server.mcpserver.exceptions import ToolError

    for value in args:  # a lone surrogate ("\ud800" in the request's JSON), as _filter_stdin marked it
        if isinstance(value, str) and (_SENTINEL in value or _LONE_SURROGATE.search(value)):
            raise ToolError(f"squeez {name}: an argument holds a lone UTF-16 surrogate escape (\\ud800-\\udfff "
                            f"without its pair), which is not text: send valid Unicode")
    try:
        return fn(*args)
    except ToolError:
        raise
    except Exception as error:
        log.exception("squeez mcp: tool %s failed", name)
        raise ToolError(f"squeez {name} failed: {type(error).__name__}: {_one_line(str(error))}") from None


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SENTINEL = "\U0010fffe"  # a noncharacter: what a lone surrogate becomes on the way to the SDK


def _filter_stdin() -> None:
    """Put a filter between the client and the SDK on fd 0: a request whose JSON holds a lone surrogate
    escape ("\\ud800") is rejected by the SDK's parser without any reply, so the client waits forever.
    The filter turns each lone surrogate into ``_SENTINEL`` (valid UTF-8), which ``_guarded`` refuses
    with a tool error. Other lines pass byte for byte."""
    import sys
    import threading

    try:
        source = os.fdopen(os.dup(0), "rb")
    except OSError:  # no stdin: nothing to filter
        return
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115 - the SDK's stdin

    def pump() -> None:
        with source, open(write_end, "wb") as sink:
            for line in source:
                with contextlib.suppress(BrokenPipeError):
                    sink.write(_without_lone_surrogates(line))
                    sink.flush()

    threading.Thread(target=pump, name="squeez-mcp-stdin", daemon=True).start()


def _without_lone_surrogates(line: bytes) -> bytes:
    if not _SURROGATE_ESCAPE.search(line):
        return line
    import json

    try:
        message = json.loads(line)
    except ValueError:
        return line  # not JSON: the SDK answers that itself

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return _LONE_SURROGATE.sub(_SENTINEL, value)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        return value

    return json.dumps(clean(message), ensure_ascii=False).encode("utf-8") + b"\n"


def _answer(result: Any) -> str:
    """The text the agent sees, newline-terminated; an unpruned answer says why (fail-open, marked)."""
    text = result.text if result.text.endswith("\n") or not result.text else result.text + "\n"
    if not result.pruned and result.note:
        text += f"[squeez: not pruned: {_one_line(result.note)}]\n"
    return text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def build_parser() -> argparse.ArgumentParser:
    from squeez_ray.cli.args import add_config_flag

    parser = argparse.ArgumentParser(prog="squeez mcp", description="Serve squeez's prune / run / show tools over "
                                     "the Model Context Protocol (stdio).",
                                     epilog="Claude Code: claude mcp add squeez -- squeez mcp")
    add_config_flag(parser)
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        import mcp  # noqa: F401 - only to tell a missing extra from a bug
    except ImportError:
        note("`squeez mcp` needs the MCP SDK: pip install 'squeez-ray[mcp]'")
        return EXIT_USAGE
    try:
        _filter_stdin()
        build_server(args.config).run("stdio")
    except KeyboardInterrupt:
        pass
    return EXIT_OK
