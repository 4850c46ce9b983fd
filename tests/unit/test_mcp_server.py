"""`squeez mcp` answers the official SDK's own client over stdio: list, prune, run, show, and errors as
tool errors (the server keeps serving after each)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")
import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"\[squeez: (\d+) lines? omitted \((\d+)-(\d+)\); squeez show (\w+) --lines \d+-\d+\]")


def pytest_log(n: int = 120) -> str:
    """A real tool output's shape: a pytest run with one failure among many passing tests."""
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0",
             f"collected {n + 1} items", ""]
    lines += [f"tests/test_module_{i // 10}.py::test_case_{i} PASSED{' ' * 20}[{i * 100 // (n + 1):3d}%]"
              for i in range(n)]
    lines += ["tests/test_parser.py::test_parse_header FAILED                              [100%]", "",
              "=================================== FAILURES ===================================",
              "______________________________ test_parse_header _______________________________", "",
              "    def test_parse_header():",
              ">       assert parse_header('X-Id: 7') == ('X-Id', 8)",
              "E       AssertionError: assert ('X-Id', 7) == ('X-Id', 8)", "",
              "tests/test_parser.py:12: AssertionError",
              "=========================== short test summary info ============================",
              "FAILED tests/test_parser.py::test_parse_header - AssertionError: assert ('X-Id', 7) == ('X-Id', 8)",
              f"========================= 1 failed, {n} passed in 0.52s ========================="]
    return "\n".join(lines) + "\n"


def server_params(tmp_path: Path, **extra_env: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(HOME=str(tmp_path), SQUEEZ_STORE=str(tmp_path / "store"), PYTHONPATH=str(REPO), SQUEEZ_DAEMON="0",
               **extra_env)
    return StdioServerParameters(command=sys.executable, args=["-m", "squeez_ray.cli", "mcp"], env=env,
                                 cwd=str(tmp_path))


def expand(answer: str, original: list[str]) -> list[str]:
    """The answer with each marker replaced by the original lines it names (the footer dropped)."""
    lines = answer.splitlines()
    assert lines[-1].startswith("[squeez: kept "), lines[-1]
    out: list[str] = []
    for line in lines[:-1]:
        marker = MARKER.fullmatch(line)
        if marker:
            count, start, end, _ = map(str, marker.groups())
            assert int(count) == int(end) - int(start) + 1
            out += original[int(start) - 1:int(end)]
        else:
            out.append(line)
    return out


def text_of(result) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", None) == "text")


async def _session_calls(params: StdioServerParameters, calls):
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await calls(session)


def drive(params, calls):
    return anyio.run(_session_calls, params, calls)


def test_the_sdk_client_lists_prunes_runs_and_shows(tmp_path):
    log = pytest_log()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "build.log").write_text(log)

    async def calls(session):
        tools = await session.list_tools()
        pruned = await session.call_tool("prune", {"query": "which test failed and why", "text": log})
        ran = await session.call_tool("run", {"query": "which test failed and why",
                                              "command": "cat build.log; echo 'exit soon' >&2; exit 3",
                                              "cwd": str(tmp_path / "work")})
        marker = MARKER.search(text_of(ran))
        assert marker, text_of(ran)
        _, start, end, ident = marker.groups()
        shown = await session.call_tool("show", {"id": ident, "lines": f"{start}-{end}"})
        whole = await session.call_tool("show", {"id": ident})
        return tools, pruned, ran, (int(start), int(end)), shown, whole

    tools, pruned, ran, (start, end), shown, whole = drive(server_params(tmp_path), calls)

    by_name = {tool.name: tool for tool in tools.tools}
    assert set(by_name) == {"prune", "run", "show"}
    assert set(by_name["prune"].input_schema["properties"]) == {"query", "text"}
    assert set(by_name["run"].input_schema["properties"]) == {"query", "command", "cwd"}
    assert set(by_name["show"].input_schema["properties"]) == {"id", "lines"}

    # The shipped encoder decides what is kept; whatever it keeps, kept lines are verbatim and every
    # dropped stretch is marked in place with its exact range (expanding the markers gives the log back).
    out = text_of(pruned)
    assert not pruned.is_error, out
    assert MARKER.search(out), out
    assert len(out.splitlines()) < len(log.splitlines()) / 2
    assert expand(out, log.splitlines()) == log.splitlines()

    answer = text_of(ran)
    assert not ran.is_error, answer  # a failing command is an answer, not a tool error
    assert answer.rstrip().endswith("[exit code 3]")
    assert "1 failed, 120 passed" in answer  # the failure summary always reaches the agent
    assert expand(answer.rsplit("[exit code", 1)[0], (log + "exit soon\n").splitlines()) == \
        (log + "exit soon\n").splitlines()

    original = (log + "exit soon\n").splitlines()
    assert not shown.is_error
    assert text_of(shown).splitlines() == original[start - 1:end]  # exactly the omitted lines
    assert text_of(whole) == log + "exit soon\n"


def test_bad_calls_are_tool_errors_and_the_server_keeps_serving(tmp_path):
    async def calls(session):
        results = [
            await session.call_tool("show", {"id": "not-hex"}),
            await session.call_tool("show", {"id": "abcdef123456"}),
            await session.call_tool("run", {"query": "q", "command": "true", "cwd": str(tmp_path / "missing")}),
            await session.call_tool("prune", {"query": "  ", "text": "x"}),
            await session.call_tool("prune", {"query": "q"}),  # a missing argument
            await session.call_tool("no_such_tool", {}),
        ]
        results.append(await session.call_tool("run", {"query": "q", "command": "echo still here"}))
        return results

    *errors, alive = drive(server_params(tmp_path), calls)
    messages = [text_of(result) for result in errors]
    assert all(result.is_error for result in errors), messages
    assert "not a store id" in messages[0]
    assert "no output with id abcdef123456" in messages[1]
    assert "is not a directory" in messages[2]
    assert "query is empty" in messages[3]
    assert not alive.is_error and text_of(alive) == "still here\n[exit code 0]"


def test_a_broken_config_fails_open_with_a_note(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("min_lines: many\n")
    text = pytest_log(30)

    async def calls(session):
        return await session.call_tool("prune", {"query": "which test failed", "text": text})

    result = drive(server_params(tmp_path, SQUEEZ_CONFIG=str(config)), calls)
    out = text_of(result)
    assert not result.is_error
    assert out.startswith(text)  # the whole output, unpruned
    assert "[squeez: not pruned: config error" in out and "min_lines" in out


def test_a_lone_surrogate_gets_a_tool_error_and_the_server_keeps_serving(tmp_path):
    """`"\\ud800"` is valid JSON but no text: the SDK's parser dropped the request without a reply (issue 34
    item 9). Raw JSON-RPC over a real server process, since the SDK's client cannot send it either."""
    import json
    import select
    import subprocess

    params = server_params(tmp_path, SQUEEZ_BACKEND="bm25")
    proc = subprocess.Popen([params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=params.env, cwd=params.cwd)

    def send(message: dict) -> None:
        proc.stdin.write(json.dumps(message).encode() + b"\n")  # ensure_ascii: the surrogate as "\ud800"
        proc.stdin.flush()

    def reply() -> dict:
        ready, _, _ = select.select([proc.stdout], [], [], 60)  # a bound on waiting: no reply fails here
        assert ready, "no reply within 60 s"
        return json.loads(proc.stdout.readline())

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert reply()["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for n, arguments in enumerate(({"query": "q\ud800", "text": "x\n" * 30},
                                       {"query": "q", "text": "a\udfffb\n" * 30}), start=2):
            send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "prune", "arguments": arguments}})
            answer = reply()
            assert answer["id"] == n and answer["result"]["isError"], answer
            assert "lone UTF-16 surrogate" in answer["result"]["content"][0]["text"]
        paired = "tests/t\ud83d\ude00.py PASSED\n" * 30  # a proper pair (an emoji) is text, and is pruned
        send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "prune", "arguments": {
            "query": "tests", "text": paired}}})
        answer = reply()
        assert not answer["result"]["isError"] and "\U0001f600" in answer["result"]["content"][0]["text"]
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()


def test_prune_and_run_over_max_input_mb_are_refused_in_bounded_memory(tmp_path):
    text = "tests/t.py PASSED\n" * 20_000  # ~360 KB, over a 0.25 MB cap

    async def calls(session):
        return [await session.call_tool("prune", {"query": "q", "text": text}),
                await session.call_tool("run", {"query": "q", "command": "yes tests/t.py PASSED | head -c 3000000; "
                                                "exit 5"}),
                await session.call_tool("run", {"query": "q", "command": "echo still here"})]

    pruned, ran, alive = drive(server_params(tmp_path, SQUEEZ_BACKEND="bm25", SQUEEZ_MAX_INPUT_MB="0.25"), calls)
    assert pruned.is_error and "over max_input_mb=0.25: not pruned" in text_of(pruned)
    assert ran.is_error and "the command's output is 3000000 bytes, over max_input_mb=0.25: not returned" in text_of(ran)
    assert "exit code 5" in text_of(ran)
    assert not alive.is_error and text_of(alive) == "still here\n[exit code 0]"
