"""Repository snapshots for tools: local mirrors in, one private checkout per worker and repository out.

Mirror layout (the input; read only): ``<mirrors>/<owner>__<name>.git`` (a bare clone, e.g.
``git clone --mirror https://github.com/owner/name <mirrors>/owner__name.git``); a non-bare clone at
``<mirrors>/<owner>__<name>`` is accepted too.

Why shared clones and not ``git worktree add``: a worktree writes its bookkeeping into the mirror
(``worktrees/``), so several workers on a shared mirror race on it and the input is modified. A
``git clone --shared --no-checkout`` borrows the mirror's objects through ``alternates`` (no copy, no
write to the mirror) and is private to one worker, so no locking is needed. Each instance then
checks out its base commit with ``--force`` and ``git clean -ffdx``: whatever a previous instance's
tools wrote (build/, .coverage, a patched file) is gone before the next one starts.

Every git command here runs through the sandbox too (no network, scrubbed env), with hooks and
fsmonitor switched off so that a tool which planted ``.git/hooks`` or config cannot run code in the
next checkout.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import OrderedDict
from pathlib import Path

from squeez_ray.collect.sandbox import run_sandboxed

# safe.directory: mirrors on shared storage often belong to another user; only command-line config
# can allow them once GIT_CONFIG_GLOBAL is /dev/null.
_GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "safe.directory=*",
        "-c", "protocol.allow=never", "-c", "protocol.file.allow=always"]


class WorkspaceError(RuntimeError):
    """A repository or commit that cannot be prepared (missing mirror, unknown commit, bad patch)."""


def mirror_path(mirrors_dir: str | Path, repo: str) -> Path:
    """The mirror of ``owner/name`` under ``mirrors_dir``, or WorkspaceError naming both layouts tried."""
    owner, _, name = repo.partition("/")
    if not owner or not name or "/" in name or ".." in repo:
        raise WorkspaceError(f"repo {repo!r} is not 'owner/name'")
    base = Path(mirrors_dir) / f"{owner}__{name}"
    for candidate in (base.with_name(base.name + ".git"), base):
        if candidate.is_dir():
            return candidate
    raise WorkspaceError(f"no mirror for {repo}: expected {base}.git (bare) or {base} under {mirrors_dir}")


class RepoCache:
    """Private checkouts of repositories for one worker, reused across instances (LRU-bounded)."""

    def __init__(self, root: str | Path, mirrors_dir: str | Path, *, max_repos: int = 4, timeout_s: float = 600):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.mirrors_dir = Path(mirrors_dir)
        self.max_repos = max_repos
        self.timeout_s = timeout_s
        self._clones: OrderedDict[str, Path] = OrderedDict()
        self._known_commits: set[tuple[str, str]] = set()

    def git(self, cwd: Path, *args: str, check: bool = True) -> str:
        result = run_sandboxed([*_GIT, *args], cwd, timeout_s=self.timeout_s, max_output_bytes=64 * 1024 * 1024,
                               max_file_bytes=0)
        if check and (result.exit_code != 0 or result.error):
            raise WorkspaceError(f"git {' '.join(args[:3])} in {cwd} failed ({result.error or result.exit_code}): "
                                 f"{result.output.strip()[-500:]}")
        return result.output

    def clone(self, repo: str) -> Path:
        """The worker's clone of ``repo`` (created on first use, no checkout)."""
        if repo in self._clones:
            self._clones.move_to_end(repo)
            return self._clones[repo]
        mirror = mirror_path(self.mirrors_dir, repo)
        target = self.root / repo.replace("/", "__")
        if not (target / ".git").is_dir():
            shutil.rmtree(target, ignore_errors=True)
            # Clone into a temporary name and rename, so a crash never leaves a half clone behind.
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=self.root))
            try:
                self.git(self.root, "clone", "--quiet", "--shared", "--no-checkout", str(mirror.resolve()), str(tmp))
                os.replace(tmp, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        self._clones[repo] = target
        while len(self._clones) > self.max_repos:
            evicted_repo, evicted = self._clones.popitem(last=False)
            shutil.rmtree(evicted, ignore_errors=True)
            self._known_commits = {k for k in self._known_commits if k[0] != evicted_repo}
        return target

    def files(self, repo: str, commit: str) -> list[str]:
        """Every tracked path at ``commit`` (sorted), read from the object store without a checkout."""
        out = self.git(self.clone(repo), "ls-tree", "-r", "-z", "--name-only", self._known(repo, commit))
        return sorted(p for p in out.split("\0") if p)

    def history_depth(self, repo: str, commit: str) -> int:
        return int(self.git(self.clone(repo), "rev-list", "--count", self._known(repo, commit)).strip() or 0)

    def checkout(self, repo: str, commit: str, test_patch: str = "") -> tuple[Path, str | None]:
        """A clean tree of ``repo`` at ``commit``; with ``test_patch`` applied when it applies.

        Returns (worktree, note): note says why the test patch was not applied, else None.
        """
        clone = self.clone(repo)
        self.git(clone, "checkout", "--quiet", "--force", "--detach", self._known(repo, commit))
        self.git(clone, "clean", "-ffdxq")
        note = None
        if test_patch.strip():
            # git apply itself refuses paths with '..', absolute paths and writes through symlinks.
            fd, patch_file = tempfile.mkstemp(prefix=".test-patch-", suffix=".diff", dir=self.root)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(test_patch if test_patch.endswith("\n") else test_patch + "\n")
            try:
                self.git(clone, "apply", "--whitespace=nowarn", patch_file)
            except WorkspaceError as error:
                note = f"test_patch not applied: {error}"
            finally:
                os.unlink(patch_file)
        return clone, note

    def _known(self, repo: str, commit: str) -> str:
        # Check first so a missing commit is one clear error, not a confusing failure of ls-tree/checkout.
        if (repo, commit) in self._known_commits:
            return commit
        result = run_sandboxed([*_GIT, "cat-file", "-e", f"{commit}^{{commit}}"], self.clone(repo),
                               timeout_s=60, max_output_bytes=4096, max_file_bytes=0)
        if result.exit_code != 0:
            raise WorkspaceError(f"commit {commit} is not in the mirror of {repo}")
        self._known_commits.add((repo, commit))
        return commit

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self._clones.clear()
