"""Refresh tests/fixtures/gpu_index.json: the metadata of every package that constraints-gpu.txt + the
gpu and deepspeed extras resolve to on the package index (needs the network; a few minutes).

    python scripts/gpu_index_snapshot.py

tests/integration/test_gpu_constraints.py resolves the same set offline against this snapshot (a
metadata-only index: pip's dry run reads each package's metadata and never downloads a wheel), so
run this after changing constraints-gpu.txt or a dependency of the gpu extra, and commit the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "fixtures" / "gpu_index.json"
# causal-conv1d is left out: source-only, built after torch with --no-build-isolation (cluster.yaml).
REQUIREMENT = ".[gpu,deepspeed]"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        # The public index alone, as a GPU node installs: no local wheel folder or mirror of this machine's
        # (they carry the CPU torch build, whose metadata lacks CUDA's dependencies).
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                               "--report", str(report), "-c", "constraints-gpu.txt", REQUIREMENT],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        items = json.loads(report.read_text())["install"]
    SNAPSHOT.write_text(json.dumps(snapshot(items), indent=1) + "\n")
    print(f"{SNAPSHOT.relative_to(REPO)}: {len(items) - 1} packages")
    return 0


def snapshot(items: list[dict]) -> dict:
    """pip's report (its ``install`` list) -> what a metadata-only index needs: names, versions, file names and
    the dependency fields (descriptions left out)."""
    packages = []
    for item in items:
        meta = item["metadata"]
        if meta["name"].lower() == "squeez-ray":
            continue
        packages.append({"name": meta["name"], "version": meta["version"],
                         "filename": unquote(item["download_info"]["url"].rsplit("/", 1)[-1].split("#")[0]),
                         "requires_python": meta.get("requires_python"),
                         "requires_dist": meta.get("requires_dist", []),
                         "provides_extra": meta.get("provides_extra", [])})
    packages.sort(key=lambda p: p["name"].lower())
    return {"requirement": REQUIREMENT, "packages": packages}


if __name__ == "__main__":
    sys.exit(main())
