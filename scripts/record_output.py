"""Run one real tool command and append its output, unedited, as a hand-label pool row (docs/HANDLABEL.md).

    python scripts/record_output.py --pool runs/handlabel/pool/mine.jsonl --source gh:encode/httpx \
        --family git_log --cwd /tmp/src/httpx --licence BSD-3-Clause --versions "httpx@ae1b9f66" \
        --shell 'git log --stat -n 30'

The command runs through bash in --cwd (run it with relative paths, so the output carries no machine paths)
with stdout and stderr merged in order, as an agent's tool sees them, and a fixed small environment (no
pager, C.UTF-8, 120 columns); trailing newlines are stripped at the very end only. The row gets its
``output_id`` from the command and output, so any later edit is caught by the pool's check. Refused, with
one line on stderr and exit 2: outputs under 5 lines (too short to label), unknown families, and sources
reserved for evaluation (``collect/pool.check_pool_row``). Prints the output id, lines and exit status.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import subprocess
import sys
from pathlib import Path

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "GIT_PAGER": "cat",
       "PAGER": "cat", "TERM": "dumb", "COLUMNS": "120"}
MIN_LINES = 5  # the checker's floor for a labelled output


def record(pool: Path, *, source: str, family: str, cwd: str, licence: str, versions: str, command: str,
           cwd_label: str | None = None, timeout_s: float = 600) -> dict:
    from squeez_ray.collect.pool import check_pool_row, make_output_id

    run = subprocess.run(["bash", "-c", command], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env=ENV, timeout=timeout_s, check=False)
    output = run.stdout.decode("utf-8", "replace").rstrip("\n")
    lines = len(output.split("\n"))
    if lines < MIN_LINES:
        raise ValueError(f"the output has {lines} lines (under {MIN_LINES}): not recorded")
    row = {"output_id": make_output_id(source, command, output), "source": source, "family": family,
           "command": command, "cwd": cwd_label or Path(cwd).resolve().name, "exit_code": run.returncode,
           "tool_output": output, "versions": versions, "licence": licence,
           "collected_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    check_pool_row(row)  # reserved sources, unknown families, a digest that does not match
    pool.parent.mkdir(parents=True, exist_ok=True)
    with pool.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return row


def main(argv: list[str] | None = None) -> int:
    from squeez_ray.schema import DataError

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", required=True, type=Path, help="pool JSONL file to append to")
    parser.add_argument("--source", required=True, help="the split group: gh:OWNER/NAME, pypi:NAME, logs:PROGRAM")
    parser.add_argument("--family", required=True, help="tool family (collect/pool.FAMILIES)")
    parser.add_argument("--cwd", required=True, help="folder the command runs in")
    parser.add_argument("--cwd-label", help="what the datasheet shows as cwd (default: the folder's name)")
    parser.add_argument("--licence", required=True)
    parser.add_argument("--versions", required=True, help="what was run, e.g. NAME@COMMIT")
    parser.add_argument("--shell", help="the command as one shell string (instead of the words after --)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    words = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    command = args.shell or shlex.join(words)
    if not command:
        parser.error("give the command after -- or as --shell")
    try:
        row = record(args.pool, source=args.source, family=args.family, cwd=args.cwd, licence=args.licence,
                     versions=args.versions, command=command, cwd_label=args.cwd_label)
    except (ValueError, DataError, OSError, subprocess.TimeoutExpired) as error:
        print(f"record_output: {error}", file=sys.stderr)
        return 2
    print(row["output_id"], len(row["tool_output"].split("\n")), "lines, exit", row["exit_code"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
