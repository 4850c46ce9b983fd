"""The sandbox fails safe: injection strings stay data, paths stay inside, hangs and floods are cut,
the network and the caller's secrets are out of reach. Real processes, no mocks."""

from __future__ import annotations

import http.server
import os
import subprocess
import time
import tracemalloc
from pathlib import Path

import pytest

from squeez_ray.collect.sandbox import UnsafePathError, network_isolation, run_sandboxed, safe_relpath
from squeez_ray.collect.tools import TOOL_TYPES, ToolArgsError, build_command, run_tool
from squeez_ray.testing.http import LoopbackServer

INJECTIONS = ["; touch PWNED", "$(touch PWNED)", "`touch PWNED`", "| touch PWNED", "&& touch PWNED"]


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text("def hello():\n    return 'hello'\n")
    (root / "outside-link").symlink_to(tmp_path)  # a directory link that leaves the tree
    (root / "passwd-link").symlink_to("/etc/passwd")
    return root


def no_pwned(*roots: Path) -> bool:
    return not any(p.name.startswith("PWNED") for root in roots for p in root.rglob("*"))


@pytest.mark.parametrize("path", ["../x", "pkg/../../x", "/etc/passwd", "-rf", "--help", "~/.ssh/id_rsa", "a\x00b",
                                  "a\nb", "pkg\\..\\x", "", "outside-link/secret", "passwd-link"])
def test_safe_relpath_rejects_paths_that_leave_the_tree(tree: Path, path: str):
    with pytest.raises(UnsafePathError):
        safe_relpath(tree, path)


def test_safe_relpath_normalises_paths_inside(tree: Path):
    assert safe_relpath(tree, "./pkg//mod.py") == "pkg/mod.py"
    assert safe_relpath(tree, ".") == "."
    assert safe_relpath(tree, "not/yet/there.py") == "not/yet/there.py"  # missing is the tool's business


@pytest.mark.parametrize("text", INJECTIONS)
def test_shell_syntax_in_arguments_stays_data(tree: Path, text: str):
    for tool_type, args in [("grep", {"pattern": text}), ("read_file", {"path": f"pkg/{text}"}),
                            ("ls", {"path": f"pkg/{text}"}), ("git_log", {"path": f"pkg/{text}"})]:
        obs = run_tool(tool_type, args, tree, timeout_s=20)
        assert obs["exit_code"] is not None and obs["error"] is None, obs
    assert no_pwned(tree, Path.cwd())


@pytest.mark.parametrize("tool_type,args", [
    ("read_file", {"path": "../../etc/passwd"}),
    ("read_file", {"path": "passwd-link"}),
    ("grep", {"pattern": "root", "path": "/etc"}),
    ("test_output", {"tests": ["../other/test_x.py::test_a"]}),
    ("curl", {"url": "file:///etc/passwd"}),
    ("curl", {"url": "-o/tmp/x http://a"}),
    ("git_diff", {"base": "--output=/tmp/owned"}),
    ("python", {"module": "os; import shutil"}),
    ("pip_install", {"target": "--index-url=http://evil"}),
    ("grep", {"pattern": "a\nb"}),
    ("no_such_tool", {}),
])
def test_unsafe_or_malformed_arguments_are_refused_before_running(tree: Path, tool_type: str, args: dict):
    with pytest.raises((UnsafePathError, ToolArgsError)):
        run_tool(tool_type, args, tree)


def test_every_tool_type_has_an_executor(tree: Path):
    # One representative argument set per type; build_command must produce an argv for each.
    args = {"read_file": {"path": "pkg/mod.py"}, "grep": {"pattern": "hello"}, "git_log": {}, "git_blame": {"path": "pkg/mod.py"},
            "git_diff": {}, "ls": {}, "python": {"module": "pkg.mod"}, "test_output": {"tests": ["pkg"]},
            "pip_install": {}, "type_check": {"path": "pkg/mod.py"}, "lint_output": {}, "build_output": {},
            "coverage": {"tests": ["pkg"]}, "curl": {"url": "http://127.0.0.1:9/"}}
    assert set(args) == set(TOOL_TYPES) and len(TOOL_TYPES) == 14
    for tool_type in TOOL_TYPES:
        assert build_command(tool_type, args[tool_type], tree).argv


def test_hanging_tool_is_killed_with_its_whole_process_group(tmp_path: Path):
    # The background child would create LATE after 2 s; the timeout at 1 s must take it down too.
    result = run_sandboxed(["sh", "-c", "(sleep 2; touch LATE) & sleep 60"], tmp_path, timeout_s=1,
                           max_output_bytes=4096)
    assert result.error and "timeout" in result.error
    assert result.exit_code is not None and result.exit_code < 0
    time.sleep(2.5)
    assert not (tmp_path / "LATE").exists()


def test_background_child_does_not_outlive_a_normal_exit(tmp_path: Path):
    result = run_sandboxed(["sh", "-c", "(sleep 1; touch LATE) > /dev/null 2>&1 & echo started"], tmp_path,
                           timeout_s=10, max_output_bytes=4096)
    assert result.exit_code == 0 and result.output == "started\n" and result.error is None
    time.sleep(1.5)
    assert not (tmp_path / "LATE").exists()


def test_a_gigabyte_of_output_is_capped_without_reading_it_all(tree: Path):
    # A module whose import prints forever (far more than 1 GB if let run), through the real python tool.
    (tree / "loud.py").write_text("import sys\nchunk = 'y' * 65535 + '\\n'\nwhile True:\n    sys.stdout.write(chunk)\n")
    cap = 1 << 20
    tracemalloc.start()
    obs = run_tool("python", {"module": "loud"}, tree, timeout_s=60, max_output_bytes=cap)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert obs["truncated"] is True and obs["error"] is None
    assert len(obs["tool_output"].encode()) == cap
    assert peak < 8 * cap  # the tool produced unbounded output; we held about one cap's worth
    assert obs["duration_s"] < 60  # it was stopped at the cap, not by the timeout


def test_yes_is_capped(tmp_path: Path):
    result = run_sandboxed(["yes"], tmp_path, timeout_s=30, max_output_bytes=65536)
    assert result.truncated and len(result.output) == 65536 and result.error is None


def test_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret_value")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws_secret_value")
    result = run_sandboxed(["env"], tmp_path, timeout_s=10, max_output_bytes=65536)
    assert "secret_value" not in result.output
    env = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    assert env["HOME"] != os.environ.get("HOME") and "squeez-home" in env["HOME"]
    assert not Path(env["HOME"]).exists()  # the private HOME is removed after the run


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"reachable")

    def log_message(self, *args):
        pass


@pytest.fixture()
def local_url():
    with LoopbackServer(_Hello) as server:
        yield f"{server.url}/"


def test_curl_cannot_reach_the_network_but_is_still_an_observation(tree: Path, local_url: str):
    if not network_isolation().startswith("unshare"):
        pytest.skip("no network namespaces here (unshare --net fails); the proxy-trap test covers this machine")
    # Control: outside the sandbox the server answers, so the check below can fail.
    control = subprocess.run(["curl", "-sS", "--max-time", "5", local_url], capture_output=True, text=True)
    assert control.stdout == "reachable"
    obs = run_tool("curl", {"url": local_url}, tree, timeout_s=20)
    assert "reachable" not in obs["tool_output"]
    assert obs["exit_code"] not in (0, None) and obs["error"] is None
    assert "curl: (7)" in obs["tool_output"]
    outside = run_tool("curl", {"url": "https://pypi.org/simple/"}, tree, timeout_s=20)
    assert outside["exit_code"] not in (0, None) and "curl: (" in outside["tool_output"]


def test_without_namespaces_the_dead_proxy_still_stops_curl(tree: Path, local_url: str):
    # The fallback where unshare is impossible: proxy variables point at a closed port.
    obs = run_tool("curl", {"url": local_url}, tree, timeout_s=20, isolate_network=False)
    assert "reachable" not in obs["tool_output"] and obs["exit_code"] not in (0, None)
    assert "127.0.0.1 port 9" in obs["tool_output"]
