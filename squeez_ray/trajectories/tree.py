"""What an input tree of stored runs holds, for the re-prune job: the units to process, the links to
copy as links, and what is skipped and why, so that nothing is read from outside the tree and
nothing disappears without a report line.

- A symbolic link (to a file, a directory, or nothing) is never followed: following it would read
  outside the input tree (a link to ``~/.ssh/id_rsa`` named ``run.traj``) or loop. It is recreated
  in the output as the same link.
- FIFOs, sockets and devices are skipped (reading a FIFO blocks forever) and reported.
- A directory named like a run file (``x.traj/``) is not a run: its files are processed one by one
  like any others, and a report line says so.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

_RUN_SUFFIXES = (".traj", ".json", ".jsonl")  # as detect._TRAJECTORY_SUFFIXES


@dataclass
class InputTree:
    units: list[str] = field(default_factory=list)  # files and V1 conversation directories, POSIX, sorted
    links: list[str] = field(default_factory=list)  # symbolic links, copied as links
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why) not copied


def scan_tree(root: Path) -> InputTree:
    from squeez_ray.trajectories import openhands_v1

    tree = InputTree()

    def walk(folder: Path) -> None:
        for child in sorted(folder.iterdir()):
            relative = child.relative_to(root).as_posix()
            mode = child.lstat().st_mode
            if stat.S_ISLNK(mode):
                tree.links.append(relative)
            elif stat.S_ISDIR(mode):
                if openhands_v1.is_conversation_dir(child):
                    tree.units.append(relative)
                    continue
                if child.name.endswith(_RUN_SUFFIXES):
                    why = "a directory named like a run file: not a run; its files, if any, are processed one by one"
                    tree.skipped.append((relative, why))
                walk(child)
            elif stat.S_ISREG(mode):
                tree.units.append(relative)
            else:
                tree.skipped.append((relative, f"not a regular file ({_kind(mode)}): not copied"))

    walk(root)
    return tree


def copy_link(source: Path, target: Path) -> None:
    """Recreate the link ``source`` at ``target`` (same link text), atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}.link")
    staging.unlink(missing_ok=True)
    os.symlink(os.readlink(source), staging)
    os.replace(staging, target)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "unknown kind"
