"""stop_process_group, which tests use to end the servers they start in their own process group."""

from __future__ import annotations

import subprocess
import time

import psutil

from squeez_ray.testing.checks import stop_process_group


def test_a_group_whose_leader_already_exited_is_ended():
    """A failed `ray start` exits and leaves its GCS and agents running in its group: they are killed too."""
    leader = subprocess.Popen(["bash", "-c", "sleep 300 & echo $!"], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    child = psutil.Process(int(leader.stdout.readline()))
    leader.wait(timeout=10)
    leader.stdout.close()
    assert child.is_running() and leader.poll() == 0  # the leader is gone, its child is not
    stop_process_group(leader, timeout=1)
    deadline = time.monotonic() + 10
    while child.is_running() and child.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    stop_process_group(leader, timeout=1)  # nothing left of the group: no error
