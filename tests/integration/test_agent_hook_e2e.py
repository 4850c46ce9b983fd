"""The whole Claude Code path with the shipped default encoder: install, hook, run, recover.

`squeez install claude-code --project` writes the hook into a temporary project; the hook command
it wrote is run the way Claude Code runs it (bash, payload on stdin) with a recorded PreToolUse
payload; the command it returns is run with bash. The answer must be pruned, carry markers whose
`squeez show --lines` give the lines back, show the failure, and exit with the test run's code.
No Ray: the encoder runs in process (onnxruntime).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster tests

SQUEEZ = Path(sys.executable).parent / "squeez"
FIXTURES = Path(__file__).parent.parent / "fixtures" / "hooks"

# A stand-in `pytest` on PATH: 150 passing tests, one failure with its traceback, the summary, exit 1.
FAKE_PYTEST = r"""#!/usr/bin/env bash
echo "============================= test session starts =============================="
for i in $(seq 1 150); do echo "tests/test_module_$i.py::test_case_$i PASSED"; done
echo "=================================== FAILURES ==================================="
echo "_____________________________ test_invoice_total ______________________________"
echo "    def test_invoice_total():"
echo ">       assert invoice_total([0.1, 0.2]) == 0.30"
echo "E       assert 0.30000000000000004 == 0.3"
echo "tests/test_invoice.py:12: AssertionError" >&2
echo "=========================== short test summary info ============================"
echo "FAILED tests/test_invoice.py::test_invoice_total - assert 0.30000000000000004 == 0.3"
echo "========================= 1 failed, 150 passed in 2.31s ========================="
exit 1
"""


def test_install_hook_run_with_the_default_encoder(tmp_path):
    project, home = tmp_path / "project", tmp_path / "home"
    (project / "bin").mkdir(parents=True)
    fake = project / "bin" / "pytest"
    fake.write_text(FAKE_PYTEST)
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "XDG_"))}
    env.update(HOME=str(home), PATH=f"{project / 'bin'}:{env['PATH']}")  # no config: the shipped encoder
    env["SQUEEZ_DAEMON"] = "0"  # no warm process left behind (tests/unit/test_cli_daemon.py covers it)

    out = subprocess.run([str(SQUEEZ), "install", "claude-code", "--project"], cwd=project, env=env,
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    (group,) = settings["hooks"]["PreToolUse"]
    assert group["matcher"] == "Bash"
    hook_command = group["hooks"][0]["command"]

    transcript = tmp_path / "transcript.jsonl"
    transcript.write_bytes((FIXTURES / "claude_code_transcript.jsonl").read_bytes())
    payload = (FIXTURES / "claude_code_pretooluse_bash.json").read_text()
    payload = payload.replace("TRANSCRIPT", str(transcript)).replace("PROJECT", str(project))
    hook = subprocess.run(["bash", "-c", hook_command], input=payload.encode(), cwd=project, env=env,
                          capture_output=True, timeout=60)
    assert hook.returncode == 0 and hook.stdout, hook.stderr
    output = json.loads(hook.stdout)["hookSpecificOutput"]
    assert "permissionDecision" not in output
    command = output["updatedInput"]["command"]
    assert "invoice totals" in command and command.endswith("-- bash -c 'pytest -q tests/'")

    answer = subprocess.run(["bash", "-c", command], cwd=project, env=env, capture_output=True, timeout=300)
    original = subprocess.run(["bash", "-c", "pytest -q tests/"], cwd=project, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT).stdout.decode()
    assert answer.returncode == 1, answer.stderr
    text = answer.stdout.decode()
    assert "(encoder" in text.rsplit("\n", 2)[-2], text  # the footer: the shipped model pruned it
    assert len(text) < len(original) / 3
    for line in ("E       assert 0.30000000000000004 == 0.3", "tests/test_invoice.py:12: AssertionError",
                 "========================= 1 failed, 150 passed in 2.31s ========================="):
        assert line in text.split("\n"), line
    markers = re.findall(r"\[squeez: \d+ lines? omitted \((\d+)-(\d+)\); squeez show (\w+) --lines \1-\2\]", text)
    assert markers
    first, last, ident = markers[0]
    shown = subprocess.run([str(SQUEEZ), "show", ident, "--lines", f"{first}-{last}"], env=env, capture_output=True)
    assert shown.stdout.decode().split("\n")[:-1] == original.split("\n")[int(first) - 1:int(last)]
