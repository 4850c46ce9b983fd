"""The plan for the next lent GPU, within its limits, as one script: what to carry, in how many runs, and what runs there.

    python scripts/gpu_loan.py --dry-run                  # here: the plan (sizes, runs, time), writes nothing
    python scripts/gpu_loan.py prepare --wheels DIR       # here: DIR's wheels cut into per-run folders under out/gpu-loan
    python scripts/gpu_loan.py run 1 --out $OUT           # there, in the run that carries out/gpu-loan/run-1

The lent machine (../shared/docs/PLATFORM.md): Python 3.12, torch 2.11 + CUDA 13, transformers, peft; no Ray, no
vLLM, no Qwen 3.5 kernels, **no network**. One run carries at most 64 MiB (the tracked tree, ~40 MiB, counts),
lasts at most 10 minutes, and the loan is 15 minutes of device time in all, machine start included; a warm
machine keeps ignored files between runs, so a large wheel could travel in parts over several runs.

What that allows, in priority order (``GROUPS``): the kernel wheels (flash-linear-attention, fla-core, einops:
1.6 MiB, pure Python on the box's Triton) travel with the first run, which installs them into
``out/gpu-loan/site`` and runs ``scripts/gpu_check.py --in-process`` (kernels, the recipe's batch at its planned
shape with the fast delta rule: tokens/s, MFU, the peak against the calibrated plan; then the merge). causal-conv1d
is a source package: the run builds it only if the box has ``nvcc``, within a time cap (the conv is a small part
of the step; transformers falls back per function). Ray (the cp312 wheel alone is 75.6 MiB) needs four more runs
of carrying before a Ray Train run: it does not fit the same loan after the main run, so it is planned and
deferred. vLLM 0.32 needs torch 2.13 (the box has 2.11) with its CUDA libraries, over 2 GiB: it never fits a
loan; serving is checked on the cluster (``scripts/gpu_check.sh`` whole).

Stdlib only: it runs on the lent machine's bare Python 3.12 as well as here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MiB = 1024 * 1024
CARRY_LIMIT = 64 * MiB  # per run, the working tree included
CARRY_MARGIN = 2 * MiB  # other helpers' untracked files, rounding
RUN_LIMIT_S = 600
LOAN_S = 900
START_S = 180  # a cold start takes minutes and counts; no start with under 240 s left
CARRY_RUN_S = 45  # a run that only carries a part: transfer, checksum
DEFAULT_DIR = REPO / "out" / "gpu-loan"

# Wheel groups, in priority order, each with the run that installs and checks it (run_s: its estimated length).
# bytes: the files' sizes from pip download here (2026-11-27) unless "estimated"; `prepare` uses the real files.
# Fetch them (cp312 for the box; all but causal-conv1d are pure Python):
#   pip download --no-deps -d W/kernels flash-linear-attention==0.6.0 fla-core==0.6.0 einops==0.8.2
#   CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE pip download --no-deps --no-build-isolation -d W/causal-conv1d causal-conv1d==1.7.0
#   pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d W/ray-train "ray[train]==2.60.0"
GROUPS = [
    {"name": "kernels", "requirements": ["flash-linear-attention==0.6.0", "fla-core==0.6.0", "einops==0.8.2"],
     "bytes": 403_549 + 1_085_221 + 65_638, "run_s": 360,
     "checks": ["jobs/check_kernels.py (which kernels import and run a tiny op)",
                "gpu_check train: the recipe's shape with the fast delta rule (tokens/s, MFU, peak vs the plan)",
                "gpu_check merge: the LoRA merged into the 2B architecture"]},
    {"name": "causal-conv1d", "requirements": ["causal-conv1d==1.7.0 (source)"], "bytes": 30_328, "run_s": 300,
     "checks": ["build with --no-build-isolation only where nvcc is on the box, within 240 s (else recorded skipped)",
                "jobs/check_kernels.py --require (both kernels)",
                "gpu_check train, 2 steps with both kernels (tokens/s)"]},
    {"name": "ray-train", "requirements": ["ray[train]==2.60.0 for cp312 (less what the box has)"],
     "bytes": 79_321_593 + 45 * MiB, "estimated": "the ray wheel measured; pyarrow, pandas and the rest estimated",
     "run_s": 300, "checks": ["gpu_check train through Ray Train on one GPU worker"]},
    {"name": "vllm", "requirements": ["vllm==0.32.0", "torch==2.13.0 (CUDA; the box has 2.11)", "CUDA 13 libraries"],
     "bytes": 2 * 1024 * MiB, "run_s": 540,
     "estimated": "CUDA torch alone ~529 MiB (torch 2.14.1's wheel on this machine's local index: 554,581,699 bytes)",
     "checks": ["gpu_check vllm: the merge loaded with pruner_gpu.yaml's options", "gpu_check serve"]},
]


def tree_bytes() -> int:
    """What every run carries anyway: tracked and untracked-not-ignored files."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.split(b"\0")
    return sum((REPO / os.fsdecode(p)).stat().st_size for p in listed if p and (REPO / os.fsdecode(p)).is_file())


def plan(groups: list[dict], tree: int, *, carry_limit: int = CARRY_LIMIT, loan_s: int = LOAN_S) -> dict:
    """Runs in order: each group's bytes cut into parts that fit one run's room beside the tree; the group's
    last part travels with the run that installs and checks it. A group that would end past the loan is deferred."""
    room = carry_limit - tree - CARRY_MARGIN
    if room <= 0:
        raise SystemExit(f"gpu_loan: the tree alone ({tree / MiB:.1f} MiB) leaves no room under {carry_limit / MiB:.0f} MiB")
    runs: list[dict] = []
    used_s, fits, deferred = START_S, [], []
    for group in groups:
        parts = max(1, math.ceil(group["bytes"] / room))
        cost = (parts - 1) * CARRY_RUN_S + group["run_s"]
        if used_s + cost > loan_s:
            deferred.append({"group": group["name"], "runs": parts, "device_s": cost,
                             "why": f"{parts} run(s), ~{cost} s, past the loan's {loan_s} s ({used_s} s already planned)"})
            continue
        for k in range(parts):
            last = k == parts - 1
            runs.append({"run": len(runs) + 1, "group": group["name"], "part": k + 1, "parts": parts,
                         "carry": f"out/gpu-loan/run-{len(runs) + 1}", "carry_bytes": min(room, group["bytes"] - k * room),
                         "est_s": group["run_s"] if last else CARRY_RUN_S, "checks": group["checks"] if last else []})
        used_s += cost
        fits.append(group["name"])
    return {"tree_bytes": tree, "room_bytes": room, "runs": runs, "fits": fits, "deferred": deferred,
            "device_s": used_s, "loan_s": loan_s}


def describe(result: dict) -> str:
    lines = [f"gpu_loan plan: tree {result['tree_bytes'] / MiB:.1f} MiB, room {result['room_bytes'] / MiB:.1f} MiB "
             f"a run; ~{result['device_s']} s of the loan's {result['loan_s']} s (cold start {START_S} s)"]
    for run in result["runs"]:
        lines.append(f"  run {run['run']}: carry {run['carry']} ({run['carry_bytes'] / MiB:.1f} MiB, {run['group']} part "
                     f"{run['part']}/{run['parts']}), ~{run['est_s']} s: "
                     f"python3 scripts/gpu_loan.py run {run['run']} --out $OUT")
        lines += [f"      checks: {check}" for check in run["checks"]]
    lines += [f"  deferred {d['group']}: {d['why']}" for d in result["deferred"]]
    return "\n".join(lines)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(MiB), b""):
            digest.update(block)
    return digest.hexdigest()


def prepare(wheels: Path, out: Path, tree: int, carry_limit: int = CARRY_LIMIT, loan_s: int = LOAN_S) -> dict:
    """Cut the wheels of DIR/<group>/ into per-run folders (out/run-N), with a manifest of parts and checksums."""
    groups = []
    for group in GROUPS:
        folder = wheels / group["name"]
        files = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
        if files:
            groups.append({**group, "bytes": sum(p.stat().st_size for p in files), "files": files, "estimated": None})
    result = plan(groups, tree, carry_limit=carry_limit, loan_s=loan_s)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict = {"plan": {k: v for k, v in result.items()}, "files": []}
    by_group = {g["name"]: g for g in groups}
    for name in result["fits"]:
        runs = [r for r in result["runs"] if r["group"] == name]
        blob = b"".join(p.read_bytes() for p in by_group[name]["files"])  # small groups; large ones are cut below
        offsets, start = [], 0
        for p in by_group[name]["files"]:
            offsets.append({"name": p.name, "start": start, "size": p.stat().st_size, "sha256": _sha256(p)})
            start += p.stat().st_size
        for run in runs:
            folder = out / f"run-{run['run']}"
            folder.mkdir(parents=True, exist_ok=True)
            begin = (run["part"] - 1) * result["room_bytes"]
            (folder / f"{name}.part{run['part']:02d}").write_bytes(blob[begin:begin + result["room_bytes"]])
        manifest["files"].append({"group": name, "runs": [r["run"] for r in runs], "files": offsets})
    text = json.dumps(manifest, indent=2, default=str)
    for run in result["runs"]:  # each run carries only its own folder: every folder has the manifest
        (out / f"run-{run['run']}" / "manifest.json").write_text(text)
    return manifest


def assemble(out: Path, group: dict) -> list[Path]:
    """There: join a group's parts (each run's folder, kept on the warm machine) and check every file's sha256."""
    parts = [out / f"run-{run}" / f"{group['group']}.part{k + 1:02d}" for k, run in enumerate(group["runs"])]
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise SystemExit(f"gpu_loan: parts not on this machine (a cold start loses them): {', '.join(missing)}")
    blob = b"".join(p.read_bytes() for p in parts)
    wheels = out / "wheels" / group["group"]
    wheels.mkdir(parents=True, exist_ok=True)
    written = []
    for f in group["files"]:
        data = blob[f["start"]:f["start"] + f["size"]]
        if hashlib.sha256(data).hexdigest() != f["sha256"]:
            raise SystemExit(f"gpu_loan: {f['name']} does not match its checksum")
        (wheels / f["name"]).write_bytes(data)
        written.append(wheels / f["name"])
    return written


def run_there(number: int, out: Path, report_dir: Path, *, dry_run: bool = False) -> list[list[str]]:
    """The commands run N executes (returned; executed unless dry_run): assemble, install, check. Each command's
    exit code and seconds go to REPORT_DIR/gpu_loan_run-N.json, rewritten after each; a failing one does not
    stop the next, and the run stops starting commands 30 s before the run limit."""
    manifest = json.loads((out / f"run-{number}" / "manifest.json").read_text())
    finished = [g for g in manifest["files"] if g["runs"][-1] == number]
    commands: list[list[str]] = []
    site, python = out / "site", sys.executable
    env = ["env", f"PYTHONPATH={site}:{REPO}"]
    names = {g["group"] for g in finished}
    for group in finished:
        if group["group"] == "causal-conv1d" and shutil.which("nvcc") is None:
            commands.append(["echo", "causal-conv1d skipped: no nvcc on this machine (its checks too)"])
            names.discard("causal-conv1d")
            continue
        wheels = [str(p) for p in assemble(out, group)] if not dry_run else [f"<{group['group']} files>"]
        build = ["--no-build-isolation"] if group["group"] == "causal-conv1d" else []
        commands.append(["env", "CAUSAL_CONV1D_FORCE_BUILD=TRUE", "timeout", "240", python, "-m", "pip", "install",
                         "--no-index", "--no-deps", *build, "--target", str(site), *wheels])
    report = str(report_dir / f"gpu_check_run-{number}.json")
    if "kernels" in names:
        commands.append([*env, python, "jobs/check_kernels.py"])
        commands.append([*env, python, "scripts/gpu_check.py", "--in-process", "--steps", "3", "--skip", "vllm,serve",
                         "--out", report, "--work-dir", "/tmp/gpu-check"])
    if "causal-conv1d" in names:
        commands.append([*env, python, "jobs/check_kernels.py", "--require"])
        commands.append([*env, python, "scripts/gpu_check.py", "--in-process", "--steps", "2", "--skip",
                         "merge,vllm,serve", "--out", report, "--work-dir", "/tmp/gpu-check-conv"])
    if "ray-train" in names:
        commands.append([*env, python, "scripts/gpu_check.py", "--steps", "2", "--skip", "merge,vllm,serve",
                         "--out", report, "--work-dir", "/tmp/gpu-check-ray"])
    if not dry_run:
        _execute(commands, report_dir / f"gpu_loan_run-{number}.json")
    return commands


def _execute(commands: list[list[str]], log: Path) -> None:
    import time

    start, done = time.monotonic(), []
    log.parent.mkdir(parents=True, exist_ok=True)
    for command in commands:
        left = RUN_LIMIT_S - 30 - (time.monotonic() - start)
        if left < 30:
            done.append({"command": command, "skipped": "the run's time is spent"})
            continue
        began = time.monotonic()
        print("gpu_loan:", " ".join(command), flush=True)
        try:
            code = subprocess.run(command, cwd=REPO, check=False, timeout=left).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
        done.append({"command": command, "exit": code, "seconds": round(time.monotonic() - began, 1)})
        log.write_text(json.dumps(done, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", nargs="?", default="plan", choices=("plan", "prepare", "run"))
    parser.add_argument("number", nargs="?", type=int, help="run: which run this is")
    parser.add_argument("--dry-run", action="store_true", help="print what would happen, write and run nothing")
    parser.add_argument("--wheels", type=Path, help="prepare: a folder with one sub-folder of files per group")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the per-run folders (ignored by git)")
    parser.add_argument("--out", type=Path, default=Path("."), help="run: where the reports go ($OUT there)")
    parser.add_argument("--carry-limit-mib", type=float, default=CARRY_LIMIT / MiB)
    args = parser.parse_args(argv)
    limit = int(args.carry_limit_mib * MiB)
    if args.action == "run":
        if args.number is None:
            parser.error("run needs the run's number")
        for command in run_there(args.number, args.dir, args.out, dry_run=args.dry_run):
            if args.dry_run:
                print(" ".join(command))
        return 0
    if args.action == "prepare" and not args.dry_run:
        if not args.wheels or not args.wheels.is_dir():
            parser.error("prepare needs --wheels DIR (DIR/kernels/*.whl, DIR/ray-train/*.whl, ...)")
        manifest = prepare(args.wheels, args.dir, tree_bytes(), limit)
        print(describe(manifest["plan"]))
        return 0
    print(describe(plan(GROUPS, tree_bytes(), carry_limit=limit)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
