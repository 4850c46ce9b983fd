"""The full-output store behind `squeez show`: ids, eviction, and many writers at once."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from squeez_ray.cli.store import SHORT_ID, OutputStore, StoreError


def test_put_get_round_trip_and_same_bytes_same_id(tmp_path):
    store = OutputStore(tmp_path, 1 << 20)
    data = b"\x00\xffbinary and text\r\n" * 10
    first = store.put(data)
    assert len(first.id) == SHORT_ID and store.get(first.id) == data
    assert store.put(data).id == first.id
    assert len(store.entries()) == 1


def test_eviction_removes_oldest_first_and_never_the_new_entry(tmp_path):
    store = OutputStore(tmp_path, 2500)
    ids = []
    for i in range(4):
        ids.append(store.put(bytes([65 + i]) * 1000).id)
        os.utime(store.resolve(ids[-1]), ns=(i * 10**9, i * 10**9))  # distinct ages whatever the clock's resolution
    assert [store.get(i)[:1] for i in ids[2:]] == [b"C", b"D"]
    for gone in ids[:2]:
        with pytest.raises(StoreError, match="evicted"):
            store.get(gone)
    # Storing bytes again makes them the newest: "C" survives the next eviction, "D" does not.
    store.put(b"C" * 1000)
    store.put(b"E" * 1000)
    assert store.get(ids[2])[:1] == b"C"
    with pytest.raises(StoreError):
        store.get(ids[3])


def test_an_output_larger_than_the_store_is_refused(tmp_path):
    with pytest.raises(StoreError, match="larger than the whole store"):
        OutputStore(tmp_path, 100).put(b"x" * 101)


def test_ambiguous_and_malformed_ids(tmp_path):
    store = OutputStore(tmp_path, 1 << 20)
    for fill in "12":  # two outputs whose ids share their first four characters
        (tmp_path / ("abcd" + fill * 60 + ".out")).write_bytes(fill.encode())
    with pytest.raises(StoreError, match="ambiguous"):
        store.get("abcd")
    assert store.resolve("abcd2").name == "abcd" + "2" * 60 + ".out"
    with pytest.raises(StoreError, match="does not match its id"):  # named by no hash of its bytes
        store.get("abcd2")
    for bad in ("abc", "xyz123", "../../etc/passwd"):
        with pytest.raises(StoreError, match="is not a store id"):
            store.get(bad)


def test_stale_temporary_files_are_cleaned(tmp_path):
    store = OutputStore(tmp_path, 1 << 20)
    stale = tmp_path / ".abc.out.xyz.tmp"
    stale.write_bytes(b"half-written")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    fresh = tmp_path / ".def.out.xyz.tmp"
    fresh.write_bytes(b"being written now")
    store.put(b"anything")
    assert not stale.exists() and fresh.exists()


def _writer(root: str, worker: int, rounds: int) -> list[str]:
    store = OutputStore(root, 40_000)
    ids = []
    for i in range(rounds):
        # Half the payloads are shared between workers: same id written by several processes at once.
        tag = f"shared {i}" if i % 2 else f"worker {worker} round {i}"
        ids.append(store.put((tag + "\n").encode() * 300).id)
    return ids


def test_concurrent_writers_leave_only_whole_outputs_within_the_bound(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.starmap(_writer, [(str(tmp_path), w, 12) for w in range(4)])
    store = OutputStore(tmp_path, 40_000)
    entries = store.entries()
    assert entries and sum(size for _, size, _ in entries) <= 40_000
    for _, _, path in entries:  # every file is complete: its content hashes to its name
        assert hashlib.sha256(path.read_bytes()).hexdigest() + ".out" == path.name
    assert not list(Path(tmp_path).glob(".*.tmp"))
    assert all(len(ids) == 12 for ids in results)  # no writer failed


# -- a private store (issue 34 item 3): whole outputs, secrets included, readable by the owner only ---------

def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_store_is_owner_only_whatever_the_umask(tmp_path):
    root = tmp_path / "cache" / "store"
    old = os.umask(0)  # the most permissive umask: files would be 0666, folders 0777
    try:
        stored = OutputStore(root, 1 << 20).put(b"AWS_SECRET_ACCESS_KEY=abc\n" * 30)
    finally:
        os.umask(old)
    assert _mode(root) == 0o700 and _mode(stored.path) == 0o600
    assert [p for p in root.iterdir() if p.name != ".lock" and _mode(p) != 0o600] == []


def test_an_existing_open_store_is_tightened_on_first_use(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    os.chmod(root, 0o755)
    old_entry = root / (hashlib.sha256(b"old").hexdigest() + ".out")
    old_entry.write_bytes(b"old")
    os.chmod(old_entry, 0o644)
    store = OutputStore(root, 1 << 20)
    store.put(b"new output\n")
    assert _mode(root) == 0o700 and _mode(old_entry) == 0o600
    assert store.get(old_entry.name[:12]) == b"old"


def test_the_pipe_keeps_outputs_private_under_a_permissive_umask(tmp_path):
    # The repro: `(env; seq 300) | squeez --backend bm25 q`, under umask 000.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "XDG_"))}
    env["SQUEEZ_DAEMON"] = "0"  # every call prunes in its own process: no warm one outlives the test
    env.update(HOME=str(tmp_path / "home"))
    data = b"AWS_SECRET_ACCESS_KEY=abc\n" + b"".join(b"%d\n" % i for i in range(300))
    squeez = Path(sys.executable).parent / "squeez"
    out = subprocess.run([str(squeez), "--backend", "bm25", "q"], input=data, capture_output=True, env=env,
                         timeout=120, preexec_fn=lambda: os.umask(0))
    assert out.returncode == 0, out.stderr
    root = tmp_path / "home" / ".cache" / "squeez" / "store"
    entries = [p for p in root.iterdir() if p.suffix == ".out"]
    assert len(entries) == 1 and entries[0].read_bytes() == data
    assert _mode(root) == 0o700 and _mode(entries[0]) == 0o600


def test_a_fifo_planted_as_the_lock_does_not_hang_the_pipe(tmp_path):
    # A plain open() of a FIFO blocks until a writer comes: the pipe hung past its own --timeout.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "XDG_"))}
    env.update(HOME=str(tmp_path / "home"), SQUEEZ_STORE=str(tmp_path / "store"))
    (tmp_path / "store").mkdir(mode=0o700)
    os.mkfifo(tmp_path / "store" / ".lock")
    data = b"".join(b"tests/t%d.py PASSED\n" % i for i in range(1, 301))
    squeez = Path(sys.executable).parent / "squeez"
    out = subprocess.run([str(squeez), "--backend", "bm25", "--timeout", "5", "tests"], input=data,
                         capture_output=True, env=env, timeout=60)  # a bound on waiting: a hang fails
    assert out.returncode == 0 and b"full output: squeez show " in out.stdout, out.stderr
    assert b".lock: not a regular file" in out.stderr or b".lock: [Errno 6]" in out.stderr, out.stderr


def test_a_lock_held_elsewhere_delays_eviction_only_boundedly(tmp_path):
    import fcntl

    store = OutputStore(tmp_path, 1 << 20)
    store.put(b"first")
    with open(tmp_path / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another open file description: flock conflicts even in-process
        answers: list = []
        putter = threading.Thread(target=lambda: answers.append(store.put(b"second")), daemon=True)
        putter.start()
        putter.join(timeout=60)  # a bound on waiting: a put that waits for the lock forever fails here
    assert answers, "put() waited for the lock without bound"
    stored = answers[0]
    assert stored.note and "held by another process" in stored.note and store.get(stored.id) == b"second"
