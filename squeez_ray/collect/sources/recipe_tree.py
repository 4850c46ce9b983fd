"""The scaffold every hand-label collection recipe shares: where sources are cached, how a command
runs (colour off, merged output, a timeout), and ``Tree``, one source tree whose commands become
raw rows (``ecosystems.py``, ``service_logs.py``)."""
from __future__ import annotations

import datetime
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from squeez_ray.collect.pool import make_output_id

ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / "runs" / "handlabel" / "cache"
TOOLS = CACHE / "tools"  # npm project holding typescript + eslint
MIN_LINES, MAX_LINES = 5, 3000
TODAY = datetime.date.today().isoformat()
# Colour off everywhere so outputs are plain text.
ENV = dict(os.environ, NO_COLOR="1", FORCE_COLOR="0", TERM="dumb", CARGO_TERM_COLOR="never",
           npm_config_color="false", npm_config_update_notifier="false", DEBIAN_FRONTEND="noninteractive",
           PATH=f"{TOOLS}/node_modules/.bin:/root/.cargo/bin:{os.environ.get('PATH', '')}")


def sh(argv, cwd, timeout=120, env=None):
    """Run argv; return (exit_code or None on timeout, merged output, trailing newlines stripped)."""
    try:
        p = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, env=env or ENV, timeout=timeout)
        code, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        code, out = None, e.output or b""
    return code, out.decode("utf-8", errors="replace").rstrip("\n")


def version(argv) -> str:
    return sh(argv, ROOT)[1].splitlines()[0].strip() if shutil.which(argv[0]) or "/" in argv[0] else "n/a"


class Tree:
    """One third-party source tree; .run() executes a command and records the row."""

    def __init__(self, source, root, licence, versions):
        self.source, self.root, self.licence, self.versions = source, Path(root), licence, versions
        self.rows = []

    def run(self, family, argv, cwd=".", timeout=120, env=None):
        code, out = sh(argv, self.root / cwd, timeout, env)
        n = out.count("\n") + 1 if out else 0
        command = argv if isinstance(argv, str) else shlex.join(str(a) for a in argv)
        if MIN_LINES <= n <= MAX_LINES:
            self.rows.append(dict(output_id=make_output_id(self.source, command, out), source=self.source, family=family,
                                  command=command, cwd=cwd, exit_code=code, tool_output=out,
                                  versions=self.versions, licence=self.licence, collected_at=TODAY))
        return code, out

    # Shared by all ecosystems: listings, greps and reads of the tree's own files.
    def browse(self, exts, symbols, n_reads=6):
        files = sorted(p for p in self.root.rglob("*") if p.is_file() and p.suffix in exts
                       and "node_modules" not in p.parts and "target" not in p.parts)

        def rel(p: Path) -> str:
            return str(p.relative_to(self.root))

        self.run("ls_find", ["ls", "-la"])
        for d in sorted({p.relative_to(self.root).parts[0] for p in files if len(p.relative_to(self.root).parts) > 1})[:4]:
            self.run("ls_find", ["ls", "-la", d])
        self.run("ls_find", ["find", ".", "-type", "f"])
        for e in exts:
            self.run("ls_find", ["find", ".", "-name", f"*{e}"])
        self.run("ls_find", ["ls", "-laR"])
        nlines = {p: sum(1 for _ in open(p, "rb")) for p in files}
        # Prefer long files (800-3000 lines) for reads, then shorter ones.
        long_ = sorted((p for p in files if 800 <= nlines[p] <= MAX_LINES), key=lambda p: -nlines[p])
        mid = sorted((p for p in files if 60 <= nlines[p] < 800), key=lambda p: -nlines[p])
        for p in long_[:n_reads] + mid[:n_reads // 2]:
            self.run("read_file", ["cat", "-n", rel(p)])
        for p in sorted((p for p in files if nlines[p] > MAX_LINES), key=lambda p: -nlines[p])[:2]:
            for start in range(1, min(nlines[p], 3600), 1200):  # files over the cap: read in windows
                self.run("read_file", ["sed", "-n", f"{start},{start + 1199}p", rel(p)])
        for p in sorted(files, key=lambda p: -nlines[p])[:3]:
            if nlines[p] > 400:
                self.run("read_file", ["sed", "-n", "200,420p", rel(p)])
        inc = [f"--include=*{e}" for e in exts]
        for s in symbols:
            self.run("grep", ["grep", "-rn", *inc, s, "."])
        self.run("grep", ["grep", "-rnc", *inc, "TODO\\|FIXME\\|XXX", "."])
        return files, nlines


def json_file(p):
    return json.loads(Path(p).read_text())
